"""Descheduling (issue #26): who is evicted, who stays and why, how often, against the loopback API."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rulesched.cluster.kube.access import KubeAccess
from rulesched.controllers.audit.deschedule_policy import Exclusions
from rulesched.controllers.audit.descheduler import DescheduleOptions
from rulesched.rules.cel import make_engine
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.settings import Settings
from tests.builders import write_rules
from tests.deschedule_setup import POLICY, controlled, pods_seen, rules, setting
from tests.kubeapi import KubeAPI, wait_for

ON = DescheduleOptions("on", rate=600.0, cooldown=600.0)


def states(caplog: pytest.LogCaptureFixture, pod: str) -> list[str]:
    """What the descheduler logged of `pod`, in order."""
    found = [r for r in caplog.records if r.getMessage().startswith("deschedule: ") and f"/{pod} on" in r.getMessage()]
    return [r.__dict__["deschedule"] for r in found]


def test_a_violating_pod_with_a_controller_is_evicted_with_an_event(
    api: KubeAPI, access: KubeAccess, tmp_path: Path
) -> None:
    controlled(api, "fx-alpha", "web-1")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "web-1")
        found.steps()
    assert api.writes.evicted() == ["fx-alpha/web-1"]
    eviction = api.writes.evictions[0]
    assert eviction["apiVersion"] == "policy/v1"
    assert eviction["deleteOptions"]["preconditions"]["uid"] == "uid-fx-alpha-web-1"
    [event] = api.writes.events
    assert event["involvedObject"] | {"uid": ""} == {
        "apiVersion": "v1", "kind": "Pod", "name": "web-1", "namespace": "fx-alpha", "uid": "",
    }  # fmt: skip
    assert event["reason"] == "Descheduled"
    assert event["message"] == "evicted by rulesched from node-d: rule xy/labelled: not labelled yes"
    assert found.descheduler.counts() == {("xy", "evicted"): 1}


def owned_by(kind: str, controller: bool = True) -> dict[str, Any]:
    return {"ownerReferences": [{"kind": kind, "name": "owner", "uid": "owner", "controller": controller}]}


NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
CLAIM = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
EPHEMERAL = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
Case = tuple[dict[str, Any], str, dict[str, Any], dict[str, Any]]
"""A pod's metadata changes, its namespace, its spec changes and its status changes."""
EXCLUDED: dict[str, Case] = {
    "daemonset": (owned_by("DaemonSet"), "fx-alpha", {}, {}),
    "mirror-pod": ({"annotations": {"kubernetes.io/config.mirror": "abc"}}, "fx-alpha", {}, {}),
    "static-pod": (owned_by("Node"), "fx-alpha", {}, {}),
    "opted-out": ({"annotations": {"rulesched.io/deschedule": "false"}}, "fx-alpha", {}, {}),
    "excluded-namespace": ({}, "kube-system", {}, {}),
    "too-young": (
        {},
        "fx-alpha",
        {},
        {"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": NOW}]},
    ),
    "too-young-started": ({}, "fx-alpha", {}, {"conditions": [], "startTime": NOW}),
    "never-placed": ({}, "fx-alpha", {}, {"conditions": [], "startTime": None}),
    "no-controller": (owned_by("ReplicaSet", controller=False), "fx-alpha", {}, {}),
    "terminating": ({"deletionTimestamp": NOW}, "fx-alpha", {}, {}),
    "system-critical": ({}, "fx-alpha", {"priority": 2_000_000_000}, {}),
    "system-critical-class": ({}, "fx-alpha", {"priorityClassName": "system-node-critical"}, {}),
    "empty-dir": ({}, "fx-alpha", {"volumes": [{"name": "tmp", "emptyDir": {}}]}, {}),
    "host-path": ({}, "fx-alpha", {"volumes": [{"name": "logs", "hostPath": {"path": "/var/log"}}]}, {}),
    "claim": ({}, "fx-alpha", {"volumes": [CLAIM]}, {}),
    "ephemeral": ({}, "fx-alpha", {"volumes": [EPHEMERAL]}, {}),
    "anti-affinity": ({}, "fx-alpha", {"affinity": ANTI_AFFINITY}, {}),
    "topology-spread": ({}, "fx-alpha", {"topologySpreadConstraints": SPREAD}, {}),
}
REASONS = {
    "static-pod": "mirror-pod",
    "too-young-started": "too-young",
    "never-placed": "too-young",
    "system-critical-class": "system-critical",
    "empty-dir": "local-storage",
    "host-path": "local-storage",
    "claim": "persistent-volume-claim",
    "ephemeral": "persistent-volume-claim",
    "anti-affinity": "unchecked-placement",
    "topology-spread": "unchecked-placement",
}


@pytest.mark.parametrize("case", EXCLUDED)
def test_excluded_pods_stay(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    changes, namespace, spec, status = EXCLUDED[case]
    controlled(api, namespace, "pod-x", spec=spec, status=status, **changes)
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(
        api, access, tmp_path, rules(policy=POLICY.replace("minAgeSeconds: 0", "minAgeSeconds: 600")), ON
    ) as found:
        pods_seen(found, "pod-x")
        found.steps()
    assert api.writes.evictions == []
    assert states(caplog, "pod-x") == [REASONS.get(case, case)]


ALLOWED: dict[str, tuple[str, Exclusions]] = {
    "system-critical": ("system-critical", Exclusions(system_critical=True)),
    "empty-dir": ("local-storage", Exclusions(local_storage=True)),
    "host-path": ("local-storage", Exclusions(local_storage=True)),
    "claim": ("persistent-volume-claim", Exclusions(claims=True)),
    "ephemeral": ("persistent-volume-claim", Exclusions(claims=True)),
    "anti-affinity": ("unchecked-placement", Exclusions(unchecked_placement=True)),
    "topology-spread": ("unchecked-placement", Exclusions(unchecked_placement=True)),
}


@pytest.mark.parametrize("case", ALLOWED)
def test_a_setting_allows_what_is_excluded_by_default(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, case: str
) -> None:
    changes, namespace, spec, status = EXCLUDED[case]
    controlled(api, namespace, "pod-x", spec=spec, status=status, **changes)
    options = DescheduleOptions("on", rate=600.0, cooldown=600.0, exclusions=ALLOWED[case][1])
    with setting(api, access, tmp_path, rules(), options) as found:
        pods_seen(found, "pod-x")
        found.steps()
    assert api.writes.evicted() == ["fx-alpha/pod-x"]


def test_the_opt_out_after_twenty_annotations_of_a_kilobyte_is_read(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The rules' view keeps at most 16 KiB of labels and annotations: the opt-out sorts after these and is cut
    off there, yet the descheduler reads it from the whole pod."""
    bulky = {f"a{i:02d}.xy.com/note": "x" * 1000 for i in range(20)}
    controlled(api, "fx-alpha", "opted", annotations=bulky | {"rulesched.io/deschedule": "false"})
    controlled(api, "fx-alpha", "plain", annotations=bulky)
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "opted", "plain")
        view = next(
            p for p in found.auditor.sources.pods.node_pods("node-d", None).pods if p["metadata"]["name"] == "opted"
        )
        assert "rulesched.io/deschedule" not in view["metadata"]["annotations"], "the rules' view cuts it off"
        found.steps()
    assert api.writes.evicted() == ["fx-alpha/plain"]
    assert states(caplog, "opted") == ["opted-out"]


def test_bare_pods_stay(api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "web-0", "sidecar-app")  # the recorded pods on node-d have no owner
        found.steps()
    assert api.writes.evictions == []
    assert states(caplog, "web-0") == ["no-controller"]


def test_a_pod_with_nowhere_else_to_go_stays(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controlled(api, "fx-alpha", "web-1")
    only_d = "node.metadata.name == 'node-d' && node.metadata.labels['filter.xy.com'] == 'yes'"
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(only_d), ON) as found:
        pods_seen(found, "web-1")
        found.steps()
    assert api.writes.evictions == []
    assert states(caplog, "web-1") == ["nowhere-else"]


def test_unschedulable_nodes_are_not_somewhere_else(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    controlled(api, "fx-alpha", "web-1")
    only_a = "node.metadata.name == 'node-a'"
    with setting(api, access, tmp_path, rules(only_a), ON) as found:
        pods_seen(found, "web-1")
        node = api.state.nodes["node-a"]
        api._change("MODIFIED", {**node, "spec": {**node.get("spec", {}), "unschedulable": True}})
        nodes = found.auditor.sources.nodes  # the change comes through the watch: wait until the cache has it
        wait_for(lambda: bool(((nodes.get("node-a") or {}).get("spec") or {}).get("unschedulable")), what="cordoned")
        found.steps()
        assert api.writes.evictions == []


def test_deschedule_on_needs_a_cluster() -> None:
    with pytest.raises(ValidationError, match="--deschedule on needs a cluster, but --cluster is off"):
        Settings(deschedule="on", cluster="off")


def test_descheduling_names_only_enforce_filters_of_its_rule_set(tmp_path: Path) -> None:
    text = rules(policy=POLICY + "  filters: [labelled, missing]\n")
    write_rules(tmp_path, text)
    with pytest.raises(RulesLoadFailed, match=r"filters names no Enforce filter of this rule set: missing"):
        load_rule_book([tmp_path], make_engine("cpp"))
