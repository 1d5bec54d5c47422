"""One nudge sent against the loopback API (`tests/kubeapi.py`), through the real client: the pod is read
first, the value written is never the one the pod holds, the read's uid and resourceVersion go with the
patch as preconditions, and a pod bound, re-created or deleted meanwhile is never patched. Refusals (403,
404, 409, 429, 500) are outcomes, and the queue drops the nudges of pods its owner no longer wants.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from rulesched.cluster.kube.access import KubeAccess
from rulesched.controllers.requeue.memory import TokenBucket
from rulesched.controllers.requeue.nudger import Nudger
from rulesched.writes.nudge import ANNOTATION, FIELD_MANAGER, Nudge, NudgeOutcome, change_id, other_value, patch_body
from tests.kubeapi import KubeAPI, wait_for

NAMESPACE = "fx-alpha"
VALUE = change_id("pods", ["node-b", "7"])


class Owner:
    """What the requeue task is to the nudger: the pods it still wants nudged, and the outcomes heard."""

    def __init__(self) -> None:
        self.waiting: set[str] = set()
        self.heard: list[tuple[str, NudgeOutcome]] = []

    def wanted(self, key: str) -> bool:
        return key in self.waiting

    def report(self, nudge: Nudge, outcome: NudgeOutcome, reason: str) -> None:
        self.heard.append((nudge.name, outcome))


def nudge(name: str, value: str = VALUE, uid: str = "") -> Nudge:
    return Nudge(f"{NAMESPACE}/{name}", NAMESPACE, name, uid or f"uid-{name}", value, "pods", 0.0, "node-b")


def nudger(access: KubeAccess, owner: Owner | None = None, rate: float = 100.0) -> Nudger:
    return Nudger(access.api, TokenBucket(rate, 1), owner or Owner(), kept=10)


def annotation(api: KubeAPI, name: str) -> Any:
    return (api.pod_object(NAMESPACE, name)["metadata"].get("annotations") or {}).get(ANNOTATION)


def test_a_nudge_writes_its_value_with_the_read_as_preconditions(api: KubeAPI, access: KubeAccess) -> None:
    version = api.add_pod(NAMESPACE, "waiting", "uid-waiting")
    outcome, reason, sent = nudger(access).send(nudge("waiting"))
    assert (outcome, reason, sent.value) == ("patched", "", VALUE)
    [patch] = api.patches()
    assert patch["body"]["metadata"] == {
        "annotations": {ANNOTATION: VALUE},
        "uid": "uid-waiting",
        "resourceVersion": str(version),
    }
    assert f"fieldManager={FIELD_MANAGER}" in patch["path"]
    assert annotation(api, "waiting") == VALUE


def test_the_value_written_is_never_the_one_the_pod_holds(api: KubeAPI, access: KubeAccess) -> None:
    api.add_pod(NAMESPACE, "waiting", "uid-waiting")
    send = nudger(access).send
    assert send(nudge("waiting"))[0] == "patched"
    writes = api.pod_writes(NAMESPACE, "waiting")
    outcome, _, again = send(nudge("waiting"))  # another change that hashes the same: the no-op
    assert outcome == "patched"
    assert again.value == other_value(VALUE, VALUE) != VALUE
    assert annotation(api, "waiting") == again.value
    assert api.pod_writes(NAMESPACE, "waiting") == writes + 1, "a patched nudge is a write the server made"
    assert send(nudge("waiting"))[1:] == ("", nudge("waiting")), "and back: each nudge a change"


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"node": "node-a"}, "dropped"),  # bound meanwhile: nothing to retry
        ({"uid": "uid-another"}, "conflict"),  # re-created under the name
        ({"deleting": "yes"}, "gone"),  # terminating: it will not be scheduled
        (None, "gone"),  # deleted
    ],
    ids=["bound", "re-created", "deleting", "deleted"],
)
def test_a_pod_that_is_not_waiting_any_more_is_never_patched(
    api: KubeAPI, access: KubeAccess, pod: dict[str, str] | None, expected: NudgeOutcome
) -> None:
    if pod is not None:
        api.add_pod(NAMESPACE, "waiting", pod.get("uid", "uid-waiting"), pod.get("node", ""))
    if pod is not None and "deleting" in pod:
        deleting = api.pod_object(NAMESPACE, "waiting")
        deleting["metadata"]["deletionTimestamp"] = "2026-11-28T05:00:00Z"
        api.update_pod(deleting)
    assert nudger(access).send(nudge("waiting"))[0] == expected
    assert api.patches() == []


@pytest.mark.parametrize(
    ("status", "expected"),
    [(403, "forbidden"), (404, "gone"), (409, "raced"), (429, "throttled"), (500, "failed")],
)
def test_a_refused_patch_is_its_outcome(api: KubeAPI, access: KubeAccess, status: int, expected: str) -> None:
    api.add_pod(NAMESPACE, "waiting", "uid-waiting")
    api.fail_patches(status)
    outcome, reason, _ = nudger(access).send(nudge("waiting"))
    assert (outcome, reason.split(":")[0]) == (expected, str(status))
    assert annotation(api, "waiting") is None


def test_a_refused_read_is_its_outcome(api: KubeAPI, access: KubeAccess) -> None:
    api.add_pod(NAMESPACE, "waiting", "uid-waiting")
    api.forbid("pods", "get")
    assert nudger(access).send(nudge("waiting"))[0] == "forbidden"
    assert api.patches() == []


def test_a_pod_that_changed_since_it_was_read_is_a_race_not_a_write(api: KubeAPI, access: KubeAccess) -> None:
    # The loopback API holds the resourceVersion precondition as kube-apiserver does: 409.
    version = api.add_pod(NAMESPACE, "waiting", "uid-waiting")
    api.set_pod_phase(NAMESPACE, "waiting", "Pending")  # another write: a new resourceVersion
    stale = patch_body(nudge("waiting"), str(version))
    with pytest.raises(ApiException) as refused:
        CoreV1Api(access.api).patch_namespaced_pod(
            "waiting", NAMESPACE, stale, _content_type="application/merge-patch+json"
        )
    assert refused.value.status == 409


def test_queued_nudges_of_pods_no_longer_wanted_are_dropped_unsent(api: KubeAPI, access: KubeAccess) -> None:
    for name in ("first", "second", "third"):
        api.add_pod(NAMESPACE, name, f"uid-{name}")
    owner = Owner()
    owner.waiting = {f"{NAMESPACE}/first", f"{NAMESPACE}/second", f"{NAMESPACE}/third"}
    sender = nudger(access, owner, rate=0.2)  # one token now, the next in 5 s
    for name in ("first", "second", "third"):
        sender.submit(nudge(name))
    sender.start()
    try:
        wait_for(lambda: ("first", "patched") in owner.heard, what="the first nudge")
        owner.waiting -= {f"{NAMESPACE}/second", f"{NAMESPACE}/third"}  # asked about again, bound, expired
        wait_for(lambda: len(owner.heard) == 3, what="the queued nudges dropped")
    finally:
        sender.stop()
    assert sorted(owner.heard) == [("first", "patched"), ("second", "dropped"), ("third", "dropped")]
    assert [p["path"].split("?")[0].rsplit("/", 1)[1] for p in api.patches()] == ["first"]
    assert sender.queued() == 0
