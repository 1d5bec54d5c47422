"""The pod and namespace caches against the loopback API replaying kube-apiserver v1.32's pods wire format.

List with the assigned, non-terminal field selector; watch events for a bind, a status change, a phase
leaving the selection and a delete; bookmarks; 410 answered by a relist; an outage survived; and the pod
index's pending placements (`recent`) confirmed by the watch or expired.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.pods.podcache import POD_SELECTOR, NamespaceCache, PodCache
from rulesched.rules.pod_values import VIEW_MAX_CHARS, VIEW_MAX_ENTRIES, namespace_view, pod_view
from rulesched.writes.bind import ApiBinder
from tests.builders import make_pod
from tests.kubeapi import KubeAPI, wait_for

FAST: dict[str, Any] = {"backoff_initial": 0.02, "backoff_max": 0.1, "connect_timeout": 1.0}


@pytest.fixture
def index() -> PodIndex:
    return PodIndex(recent_seconds=30.0)


@pytest.fixture
def pods(access: KubeAccess, index: PodIndex) -> Iterator[PodCache]:
    cache = PodCache(access.api, index, **FAST)
    cache.start()
    assert cache.wait_ready(5), "the first pod list did not complete"
    yield cache
    cache.stop()


@pytest.fixture
def namespaces(access: KubeAccess) -> Iterator[NamespaceCache]:
    cache = NamespaceCache(access.api, **FAST)
    cache.start()
    assert cache.wait_ready(5), "the first namespace list did not complete"
    yield cache
    cache.stop()


def names_on(cache: PodCache, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cache.node_pods(node, None).pods)


def test_first_list_keeps_the_assigned_non_terminal_pods_trimmed(pods: PodCache, api: KubeAPI) -> None:
    listed = api.requests("GET /api/v1/pods?")
    assert f"fieldSelector={POD_SELECTOR}" in unquote(listed[0])
    assert names_on(pods, "node-d") == ["sidecar-app", "web-0"]
    view = next(p for p in pods.node_pods("node-d", None).pods if p["metadata"]["name"] == "sidecar-app")
    assert set(view) == {"metadata", "spec", "requests"}
    assert "managedFields" not in view["metadata"]
    assert set(view["spec"]) <= {"nodeName", "priority", "priorityClassName", "schedulerName"}
    # init-schema 500m runs before the log-shipper sidecar (100m) starts; app 200m; overhead 250m:
    # max(200m + 100m, 500m) + 250m, as kube-scheduler computes it
    assert view["requests"]["cpu"] == pytest.approx(0.75)
    allocated = pods.node_pods("node-d", None).allocated
    assert allocated["pods"] == 2.0
    assert allocated["cpu"] == pytest.approx(0.75 + 0.25)
    empty = pods.node_pods("node-a", None)
    assert (empty.allocated, empty.recent) == (
        {"cpu": 0.0, "memory": 0.0, "pods": 0.0},
        {"count": 0.0, "requests": {"cpu": 0.0, "memory": 0.0}, "estimates": {"cpu": 0.0, "memory": 0.0}},
    )


def test_bind_status_change_and_delete_are_followed(pods: PodCache, api: KubeAPI, access: KubeAccess) -> None:
    api.add_pod("fx-beta", "w-run", "uid-w-run")
    generation = pods.generation()
    assert pods.node_pods("node-b", None).pods == []  # not assigned: outside the selection
    assert ApiBinder(access.api).bind("fx-beta", "w-run", "uid-w-run", "node-b") == ""
    wait_for(lambda: names_on(pods, "node-b") == ["w-run"], what="the bound pod")
    assert pods.changed_since(generation) == {"node-b"}, "only the pod's node changed"
    assert pods.node_pods("node-b", None).recent["count"] == 1.0, "just placed: recent"
    version = pods.version_of("node-b")
    rv = api.set_pod_phase("fx-beta", "w-run", "Running")
    wait_for(lambda: pods.status().resource_version == str(rv), what="the status change")
    assert pods.version_of("node-b") == version, "a status change rules cannot see rebuilds nothing"
    api.delete_pod("fx-beta", "w-run")
    wait_for(lambda: names_on(pods, "node-b") == [], what="the deleted pod gone")


def test_a_pod_leaving_the_selection_is_removed(pods: PodCache, api: KubeAPI) -> None:
    api.add_pod("fx-alpha", "w-job", "uid-w-job", "node-c")
    wait_for(lambda: names_on(pods, "node-c") == ["w-job"], what="the pod created bound")
    api.set_pod_phase("fx-alpha", "w-job", "Succeeded")  # the watch cache sends DELETED with the old content
    wait_for(lambda: names_on(pods, "node-c") == [], what="the terminated pod gone")


def test_bookmarks_move_the_resource_version(pods: PodCache, api: KubeAPI) -> None:
    wait_for(lambda: bool(api.requests("GET /api/v1/pods?allowWatchBookmarks=true")), what="the watch")
    rv = api.bump()
    api.bookmark()
    wait_for(lambda: pods.status().resource_version == str(rv), what="the bookmark")


def test_410_relists_without_a_gap(pods: PodCache, api: KubeAPI) -> None:
    wait_for(lambda: bool(api.requests("GET /api/v1/pods?allowWatchBookmarks=true")), what="the watch")
    seen: list[list[str]] = []
    api.expire(lambda: api.add_pod("fx-beta", "late", "uid-late", "node-a"))
    deadline = time.monotonic() + 5
    while names_on(pods, "node-a") != ["late"] and time.monotonic() < deadline:
        seen.append(names_on(pods, "node-d"))
        time.sleep(0.005)
    assert names_on(pods, "node-a") == ["late"]
    assert all(s == ["sidecar-app", "web-0"] for s in seen), "pods disappeared during the relist"
    assert pods.status().relists == 2


def test_an_outage_keeps_the_last_pods_and_recovers(pods: PodCache, api: KubeAPI) -> None:
    wait_for(lambda: bool(api.requests("GET /api/v1/pods?allowWatchBookmarks=true")), what="the watch")
    api.go_down()
    wait_for(lambda: pods.status().failing, what="the outage noticed")
    assert names_on(pods, "node-d") == ["sidecar-app", "web-0"]
    api.come_back()
    api.add_pod("fx-beta", "after", "uid-after", "node-e")
    wait_for(lambda: names_on(pods, "node-e") == ["after"], timeout=10, what="the pod after the outage")
    assert not pods.status().failing


def test_namespaces_are_listed_and_followed(namespaces: NamespaceCache, api: KubeAPI) -> None:
    found = namespaces.get("fx-alpha")
    assert found is not None
    assert found["metadata"]["labels"]["team.xy.com/name"] == "alpha"
    assert set(found["metadata"]) == {"name", "labels", "annotations"}
    api.label_namespace("fx-alpha", "team", "ml")
    wait_for(lambda: (namespaces.get("fx-alpha") or {})["metadata"]["labels"].get("team") == "ml")


def test_a_placement_counts_until_the_watch_shows_the_pod(pods: PodCache, api: KubeAPI, access: KubeAccess) -> None:
    api.add_pod("fx-beta", "burst-0", "uid-burst-0")
    pod = make_pod(name="burst-0", namespace="fx-beta", requests={"cpu": "500m"})
    pod["metadata"]["uid"] = "uid-burst-0"
    pods.reserve(pod, "node-a")
    recent = pods.node_pods("node-a", None).recent
    assert (recent["count"], recent["requests"]["cpu"]) == (1.0, 0.5)
    assert pods.node_pods("node-a", None).pods == [], "pending placements are in recent only"
    ApiBinder(access.api).bind("fx-beta", "burst-0", "uid-burst-0", "node-c")  # went elsewhere
    wait_for(lambda: names_on(pods, "node-c") == ["burst-0"], what="the pod bound")
    assert pods.node_pods("node-a", None).recent["count"] == 0.0, "the watch showed where it really went"
    assert pods.node_pods("node-c", None).recent["count"] == 1.0


def test_pending_placements_expire_and_are_bounded() -> None:
    index = PodIndex(recent_seconds=0.05, max_pending=2)
    for number in range(3):
        pod = make_pod(name=f"p{number}", requests={"cpu": "1"})
        pod["metadata"]["uid"] = f"u{number}"
        index.reserve(pod, "node-a")
    assert index.pending() == 2, "the oldest placement dropped"
    assert index.node_pods("node-a", None).recent["count"] == 2.0
    generation = index.generation()
    time.sleep(0.1)
    assert index.generation() > generation, "expiry is a change of node-a"
    assert index.changed_since(generation) == {"node-a"}
    assert index.node_pods("node-a", None).recent["count"] == 0.0
    assert index.pending() == 0


def test_recent_counts_the_pods_placed_after_the_sample() -> None:
    index = PodIndex()
    old = make_pod(name="old", requests={"cpu": "1"})
    new = make_pod(name="new", requests={"cpu": "2"})
    now = datetime.datetime.now(datetime.UTC)
    for pod, age in ((old, 120), (new, 5)):
        pod["metadata"]["uid"] = pod["metadata"]["name"]
        pod["spec"]["nodeName"] = "node-a"
        stamp = (now - datetime.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp}],
        }
    index.replace([old, new])
    sampled = now - datetime.timedelta(seconds=60)
    node = index.node_pods("node-a", sampled)
    assert (node.allocated["cpu"], node.allocated["pods"]) == (3.0, 2.0)
    assert (node.recent["count"], node.recent["requests"]["cpu"]) == (1.0, 2.0)
    without = node.without({"new"})
    assert (without.allocated["cpu"], without.recent["count"], without.recent["requests"]["cpu"]) == (1.0, 0.0, 0.0)


def test_the_pod_index_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    index = PodIndex(max_pods=2)
    bound = []
    for number in range(3):
        pod = make_pod(name=f"p{number}")
        pod["metadata"]["uid"] = f"u{number}"
        pod["spec"]["nodeName"] = "node-a"
        bound.append(pod)
    index.replace(bound[:2])
    index.apply("ADDED", bound[2])
    assert index.size() == 2
    assert index.overflowed
    assert "pod cache full" in caplog.text


def kept_chars(view: dict[str, Any]) -> int:
    return sum(len(k) + len(v) for part in ("labels", "annotations") for k, v in view["metadata"][part].items())


def test_a_cached_pod_keeps_a_bounded_amount_of_labels_and_annotations() -> None:
    # Kubernetes allows 256 KiB of annotations (and labels without a total): a pod built to be large
    # would otherwise cost that much in the cache, 200,000 times over (--max-pods).
    pod = make_pod(name="huge", labels={"app": "web"})
    pod["metadata"]["annotations"] = {f"a-{i:03}": "x" * 1000 for i in range(250)} | {"team": "ml"}
    view = pod_view(pod)
    assert view["metadata"]["labels"] == {"app": "web"}, "labels first"
    assert list(view["metadata"]["annotations"]) == [f"a-{i:03}" for i in range(16)], "then annotations, in key order"
    assert kept_chars(view) <= VIEW_MAX_CHARS
    many_labels = make_pod(name="labelled", labels={f"l-{i:04}": "v" * 63 for i in range(1000)})
    view = pod_view(many_labels)
    assert 0 < len(view["metadata"]["labels"]) < 1000
    assert kept_chars(view) <= VIEW_MAX_CHARS
    tiny_labels = make_pod(name="tiny", labels={f"{i:05}": "" for i in range(20_000)})
    assert list(pod_view(tiny_labels)["metadata"]["labels"]) == [f"{i:05}" for i in range(VIEW_MAX_ENTRIES)]
    namespace = namespace_view({}, {"metadata": {"name": "big", "annotations": pod["metadata"]["annotations"]}})
    assert kept_chars(namespace) <= VIEW_MAX_CHARS


def test_an_ordinary_pod_keeps_every_label_and_short_annotation() -> None:
    pod = make_pod(name="web-0", labels={"app": "web", "pod-template-hash": "5d8f7c9b4"})
    pod["metadata"]["annotations"] = {"team": "ml", "kubectl.kubernetes.io/last-applied-configuration": "{" * 2000}
    view = pod_view(pod)
    assert view["metadata"]["labels"] == {"app": "web", "pod-template-hash": "5d8f7c9b4"}
    assert view["metadata"]["annotations"] == {"team": "ml"}


def test_a_binding_counts_the_requests_of_a_pod_ranked_with_a_tie_and_those_views_are_bounded() -> None:
    index = PodIndex(max_pending=2)
    for number in range(3):
        index.ranked(make_pod(name=f"p{number}", requests={"cpu": "1"}))  # ties: no node ranked first
    assert index.pending() == 0
    for number in (0, 2):  # a binding names the pod only
        named = {"namespace": "default", "name": f"p{number}", "uid": f"uid-default-p{number}"}
        index.reserve({"metadata": named}, "node-a")
    recent = index.node_pods("node-a", None).recent
    assert (recent["count"], recent["requests"]["cpu"]) == (2.0, 1.0), "p0's view was the oldest of three: forgotten"
