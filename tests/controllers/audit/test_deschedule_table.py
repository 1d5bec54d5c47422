"""Issue #39's table against the loopback API: a pod is evicted only when another node passes both its rulesched
filters and kube-scheduler's node checks (`cluster/fit.py`); the pods kube-scheduler could place nowhere else, and
the pod that opted out, stay, while the plain replicas beside them are evicted."""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.controllers.audit.descheduler import DescheduleOptions
from tests.deschedule_setup import Setting, controlled, pods_seen, rules, setting
from tests.kubeapi import KubeAPI, wait_for

ON = DescheduleOptions("on", rate=600.0, cooldown=600.0)
PLAIN = ("web-1", "web-2")
BULKY = {f"a{i:02d}.xy.com/note": "x" * 1000 for i in range(20)}
"""20 annotations of 1 KB: the rules' view of a pod keeps 16 KiB, so an annotation sorted after them is cut off."""


def states(caplog: pytest.LogCaptureFixture, pod: str) -> list[str]:
    found = [r for r in caplog.records if r.getMessage().startswith("deschedule: ") and f"/{pod} on" in r.getMessage()]
    return [r.__dict__["deschedule"] for r in found]


def plain_replicas(api: KubeAPI) -> None:
    for name in PLAIN:
        controlled(api, "fx-alpha", name)


def run(found: Setting) -> None:
    """Steps enough for every eviction at 600 a minute (one every 0.1 s), and a few more."""
    for _ in range(4):
        found.steps(2)
        time.sleep(0.12)


@pytest.mark.parametrize(
    ("pod", "changes", "state"),
    [
        ("pinned", {"spec": {"nodeSelector": {"kubernetes.io/hostname": "node-d"}}}, "nowhere-else"),
        ("big", {"cpu": "3500m"}, "nowhere-else"),
        ("opted", {"annotations": BULKY | {"rulesched.io/deschedule": "false"}}, "opted-out"),
    ],
)
def test_the_issues_table_the_pod_that_must_stay_stays_and_the_plain_replicas_go(
    api: KubeAPI,
    access: KubeAccess,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    pod: str,
    changes: dict[str, Any],
    state: str,
) -> None:
    # node-a (4 CPU) and node-b (8 CPU) pass the rule with 3 CPU free each; node-e passes it but is tainted.
    controlled(api, "fx-alpha", "filler-a", "node-a", cpu="1")
    controlled(api, "fx-alpha", "filler-b", "node-b", cpu="5")
    plain_replicas(api)
    controlled(api, "fx-alpha", pod, **changes)
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, pod, *PLAIN)
        run(found)
    assert sorted(api.writes.evicted()) == [f"fx-alpha/{name}" for name in PLAIN]
    assert states(caplog, pod) == [state]


def test_a_pod_that_fits_is_evicted_when_room_is_free(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    """The control of the 3.5 CPU case: with node-b's 8 CPU free, the same pod goes."""
    controlled(api, "fx-alpha", "big", cpu="3500m")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "big")
        run(found)
    assert api.writes.evicted() == ["fx-alpha/big"]


ONLY_E = "node.metadata.name == 'node-e'"
"""node-e passes only this rule; it carries the taint `dedicated=infra:NoSchedule`."""


def test_a_taint_the_pod_does_not_tolerate_is_nowhere_else(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controlled(api, "fx-alpha", "web-1")
    toleration = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
    controlled(api, "fx-alpha", "tolerant", spec={"tolerations": toleration})
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(ONLY_E), ON) as found:
        pods_seen(found, "web-1", "tolerant")
        run(found)
    assert api.writes.evicted() == ["fx-alpha/tolerant"]
    assert states(caplog, "web-1") == ["nowhere-else"]


def change_node(api: KubeAPI, found: Setting, name: str, change: Any) -> None:
    """Change a node through the watch, and wait until the node cache has the change."""
    with api.cond:
        node = copy.deepcopy(api.state.nodes[name])
    change(node)
    api._change("MODIFIED", node)
    nodes = found.auditor.sources.nodes
    version = node["metadata"]["resourceVersion"]
    wait_for(lambda: ((nodes.get(name) or {}).get("metadata") or {}).get("resourceVersion") == version, what=name)


def not_ready(node: dict[str, Any]) -> None:
    node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]


def required_zone(zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def test_a_node_not_ready_is_not_somewhere_else(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    controlled(api, "fx-alpha", "web-1")
    with setting(api, access, tmp_path, rules("node.metadata.name == 'node-a'"), ON) as found:
        pods_seen(found, "web-1")
        change_node(api, found, "node-a", not_ready)
        run(found)
    assert api.writes.evicted() == []


def test_required_node_affinity_is_asked(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    """Of the nodes the rule passes (a in z1, b in z2, e in z3 but tainted), only the pod wanting z2 may move."""
    controlled(api, "fx-alpha", "wants-z3", spec={"affinity": required_zone("z3")})
    controlled(api, "fx-alpha", "wants-z2", spec={"affinity": required_zone("z2")})
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "wants-z3", "wants-z2")
        run(found)
    assert api.writes.evicted() == ["fx-alpha/wants-z2"]
