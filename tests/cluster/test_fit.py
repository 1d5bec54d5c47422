"""kube-scheduler's node checks as the descheduler asks them (`cluster/fit.py`): tables of (pod, node, expected),
the expectations read from kube-scheduler's plugins (nodeaffinity, tainttoleration, nodeunschedulable,
noderesources, nodename) and component-helpers' nodeaffinity."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from rulesched.cluster.fit import NodeUse, insufficient, misfit, pod_level_requests, tolerates
from rulesched.cluster.pods.placement_view import PlacementViews, node_name_in_spec, placement_view, scheduled_at
from rulesched.controllers.audit.deschedule_policy import Exclusions, exclusion
from rulesched.rules.model import Descheduling
from rulesched.rules.pod_values import pod_requests

READY = [{"type": "Ready", "status": "True"}]


def make_node(
    name: str = "n1",
    labels: dict[str, str] | None = None,
    *,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    conditions: list[dict[str, str]] | None = None,
    allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {
            "conditions": READY if conditions is None else conditions,
            "allocatable": allocatable or {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }


def make_pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


ZONE = {"zone": "a", "cores": "8"}
AFFINITY: list[tuple[str, dict[str, Any], dict[str, str], bool]] = [
    ("no selector", {}, ZONE, True),
    ("selector equal", {"nodeSelector": {"zone": "a"}}, ZONE, True),
    ("selector differs", {"nodeSelector": {"zone": "b"}}, ZONE, False),
    ("selector label absent", {"nodeSelector": {"disk": "ssd"}}, ZONE, False),
    ("hostname selector on another node", {"nodeSelector": {"kubernetes.io/hostname": "n2"}}, ZONE, False),
    ("In", {"affinity": required(expression("zone", "In", "a", "b"))}, ZONE, True),
    ("In absent", {"affinity": required(expression("disk", "In", "ssd"))}, ZONE, False),
    ("In without values cannot be parsed", {"affinity": required(expression("zone", "In"))}, ZONE, False),
    ("NotIn", {"affinity": required(expression("zone", "NotIn", "a"))}, ZONE, False),
    ("NotIn absent label matches", {"affinity": required(expression("disk", "NotIn", "ssd"))}, ZONE, True),
    ("Exists", {"affinity": required(expression("zone", "Exists"))}, ZONE, True),
    ("Exists with values cannot be parsed", {"affinity": required(expression("zone", "Exists", "a"))}, ZONE, False),
    ("DoesNotExist", {"affinity": required(expression("zone", "DoesNotExist"))}, ZONE, False),
    ("DoesNotExist absent", {"affinity": required(expression("disk", "DoesNotExist"))}, ZONE, True),
    ("Gt", {"affinity": required(expression("cores", "Gt", "4"))}, ZONE, True),
    ("Gt equal", {"affinity": required(expression("cores", "Gt", "8"))}, ZONE, False),
    ("Lt", {"affinity": required(expression("cores", "Lt", "16"))}, ZONE, True),
    ("Gt of a label not a number", {"affinity": required(expression("zone", "Gt", "1"))}, ZONE, False),
    ("Gt with a value not a number", {"affinity": required(expression("cores", "Gt", "x"))}, ZONE, False),
    ("Gt with two values", {"affinity": required(expression("cores", "Gt", "1", "2"))}, ZONE, False),
    ("unknown operator", {"affinity": required(expression("zone", "Near", "a"))}, ZONE, False),
    (
        "terms are ORed",
        {"affinity": required(expression("zone", "In", "b"), expression("zone", "In", "a"))},
        ZONE,
        True,
    ),
    (
        "expressions are ANDed",
        {
            "affinity": required(
                {
                    "matchExpressions": [
                        *expression("zone", "In", "a")["matchExpressions"],
                        *expression("cores", "Lt", "4")["matchExpressions"],
                    ]
                }
            )
        },
        ZONE,
        False,
    ),
    ("an empty term matches nothing", {"affinity": required({})}, ZONE, False),
    ("no terms match nothing", {"affinity": required()}, ZONE, False),
    (
        "a term that cannot be parsed does not stop another",
        {"affinity": required(expression("zone", "In"), expression("zone", "Exists"))},
        ZONE,
        True,
    ),
    (
        "selector and affinity both",
        {"nodeSelector": {"zone": "b"}, "affinity": required(expression("zone", "Exists"))},
        ZONE,
        False,
    ),
    (
        "matchFields In",
        {"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})},
        ZONE,
        True,
    ),
    (
        "matchFields In another",
        {"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]})},
        ZONE,
        False,
    ),
    (
        "matchFields NotIn",
        {"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]})},
        ZONE,
        True,
    ),
    (
        "matchFields with two values",
        {"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]})},
        ZONE,
        False,
    ),
    (
        "preferred only",
        {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": expression("zone", "In", "b")}
                    ]
                }
            }
        },
        ZONE,
        True,
    ),
]


@pytest.mark.parametrize(("case", "spec", "labels", "fits"), AFFINITY, ids=[c[0] for c in AFFINITY])
def test_node_selector_and_required_affinity(
    case: str, spec: dict[str, Any], labels: dict[str, str], fits: bool
) -> None:
    reason = misfit(make_pod(**spec), {}, make_node(labels=labels), NodeUse())
    assert (reason is None) == fits, reason
    assert fits or reason == "node affinity"


TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
TOLERATIONS: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("Equal", {"key": "dedicated", "operator": "Equal", "value": "infra"}, TAINT, True),
    ("no operator is Equal", {"key": "dedicated", "value": "infra"}, TAINT, True),
    ("Equal other value", {"key": "dedicated", "value": "batch"}, TAINT, False),
    ("Exists", {"key": "dedicated", "operator": "Exists"}, TAINT, True),
    ("Exists without key tolerates every taint", {"operator": "Exists"}, TAINT, True),
    ("other key", {"key": "gpu", "operator": "Exists"}, TAINT, False),
    ("same effect", {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, TAINT, True),
    ("other effect", {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, TAINT, False),
    (
        "Gt",
        {"key": "level", "operator": "Gt", "value": "3"},
        {"key": "level", "value": "5", "effect": "NoSchedule"},
        True,
    ),
    (
        "Lt",
        {"key": "level", "operator": "Lt", "value": "3"},
        {"key": "level", "value": "5", "effect": "NoSchedule"},
        False,
    ),
    ("Gt not a number", {"key": "level", "operator": "Gt", "value": "x"}, {"key": "level", "value": "5"}, False),
    ("unknown operator", {"key": "dedicated", "operator": "Like", "value": "infra"}, TAINT, False),
]


@pytest.mark.parametrize(("case", "toleration", "taint", "expected"), TOLERATIONS, ids=[c[0] for c in TOLERATIONS])
def test_toleration_matches_taint(case: str, toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


@pytest.mark.parametrize(("effect", "fits"), [("NoSchedule", False), ("NoExecute", False), ("PreferNoSchedule", True)])
def test_untolerated_taints_that_filter(effect: str, fits: bool) -> None:
    node = make_node(taints=[TAINT | {"effect": effect}])
    assert (misfit(make_pod(), {}, node, NodeUse()) is None) is fits
    tolerated = make_pod(tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert misfit(tolerated, {}, node, NodeUse()) is None


NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
NODES: list[tuple[str, dict[str, Any], dict[str, Any], str | None]] = [
    ("cordoned", {}, make_node(unschedulable=True), "unschedulable"),
    (
        "cordoned, tolerated",
        {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]},
        make_node(unschedulable=True),
        None,
    ),
    ("not Ready", {}, make_node(conditions=[{"type": "Ready", "status": "False"}]), "not ready"),
    ("Ready unknown", {}, make_node(conditions=[{"type": "Ready", "status": "Unknown"}]), "not ready"),
    ("no conditions", {}, make_node(conditions=[]), "not ready"),
    ("not-ready taint", {}, make_node(taints=[NOT_READY_TAINT]), "untolerated taint node.kubernetes.io/not-ready"),
    ("nodeName of another node", {"nodeName": "n2"}, make_node(), "node name"),
    ("nodeName of this node", {"nodeName": "n1"}, make_node(), None),
]


@pytest.mark.parametrize(("case", "spec", "node", "reason"), NODES, ids=[c[0] for c in NODES])
def test_node_state(case: str, spec: dict[str, Any], node: dict[str, Any], reason: str | None) -> None:
    assert misfit(make_pod(**spec), {}, node, NodeUse()) == reason


def container(cpu: str, memory: str = "0", **more: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}, **more}


USED = NodeUse(10, {"cpu": 1.0, "memory": 2 * 2**30})
RESOURCES: list[tuple[str, dict[str, Any], NodeUse, list[str]]] = [
    ("fits what is free", {"containers": [container("3", "6Gi")]}, USED, []),
    ("3.5 CPU against 3 free", {"containers": [container("3500m")]}, USED, ["Insufficient cpu"]),
    ("memory", {"containers": [container("1", "7Gi")]}, USED, ["Insufficient memory"]),
    ("containers are summed", {"containers": [container("2"), container("1500m")]}, USED, ["Insufficient cpu"]),
    (
        "an init container's peak",
        {"containers": [container("1")], "initContainers": [container("3500m")]},
        USED,
        ["Insufficient cpu"],
    ),
    (
        "a sidecar adds up",
        {"containers": [container("2")], "initContainers": [container("1500m", restartPolicy="Always")]},
        USED,
        ["Insufficient cpu"],
    ),
    ("overhead", {"containers": [container("2900m")], "overhead": {"cpu": "200m"}}, USED, ["Insufficient cpu"]),
    ("pods count", {"containers": [container("1")]}, NodeUse(110, {}), ["Too many pods"]),
    (
        "extended resource absent",
        {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
        USED,
        ["Insufficient nvidia.com/gpu"],
    ),
    ("nothing requested", {"containers": [{"name": "c"}]}, USED, []),
]


@pytest.mark.parametrize(("case", "spec", "use", "lacking"), RESOURCES, ids=[c[0] for c in RESOURCES])
def test_resource_fit(case: str, spec: dict[str, Any], use: NodeUse, lacking: list[str]) -> None:
    pod = make_pod(**spec)
    assert insufficient(pod_level_requests(pod, pod_requests(pod)), make_node(), use) == lacking


def test_pod_level_requests_stand_for_the_containers() -> None:
    pod = make_pod(containers=[container("100m")], resources={"requests": {"cpu": "3500m"}})
    assert misfit(pod, pod_requests(pod), make_node(), USED) == "Insufficient cpu"


def test_the_placement_view_keeps_what_the_checks_read() -> None:
    pod = make_pod(
        nodeName="n1",
        nodeSelector={"zone": "a"},
        tolerations=[{"operator": "Exists"}],
        containers=[container("1")],
        volumes=[{"name": "tmp", "emptyDir": {"medium": "Memory"}}],
    )
    pod["status"] = {"startTime": "2026-11-23T01:09:36Z"}
    view = placement_view(pod)
    assert view["spec"]["nodeSelector"] == {"zone": "a"}
    assert view["spec"]["volumes"] == [{"name": "tmp", "emptyDir": {}}]
    assert "nodeName" not in view["spec"], "a scheduler's binding is not the pod's own wish"
    assert view["scheduledAt"] == "2026-11-23T01:09:36Z"


def test_a_node_name_its_creator_wrote_is_kept() -> None:
    pod = make_pod(nodeName="n1")
    pod["metadata"]["managedFields"] = [{"manager": "kube-controller-manager", "operation": "Update",
                                         "fieldsV1": {"f:spec": {"f:nodeName": {}}}}]  # fmt: skip
    assert node_name_in_spec(pod)
    assert misfit(placement_view(pod), {}, make_node("n2"), NodeUse()) == "node name"


def test_placed_is_the_pod_scheduled_condition_before_the_start_time() -> None:
    pod = make_pod()
    pod["status"] = {
        "startTime": "2026-11-23T01:09:40Z",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-23T01:09:35Z"}],
    }
    assert scheduled_at(pod) == "2026-11-23T01:09:35Z"
    assert scheduled_at(make_pod()) is None


def test_a_pod_too_large_to_check_keeps_no_spec() -> None:
    pod = make_pod(nodeSelector={f"k{i}": "v" * 100 for i in range(400)})
    view = placement_view(pod)
    assert view["oversized"]
    assert "nodeSelector" not in view["spec"]


def pod_on(name: str, node: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"nodeName": node}}


def test_placement_views_are_bounded_and_a_pod_beyond_has_none() -> None:
    views = PlacementViews(max_pods=2)
    views.replace([pod_on("a", "n1"), pod_on("b", "n1")])
    views.apply("ADDED", pod_on("c", "n1"))
    assert (len(views), views.overflowed) == (2, True)
    assert views.get("uid-c", "n1") is None
    assert views.get("uid-a", "n2") is None, "a view is of the pod on its node"
    views.apply("DELETED", pod_on("a", "n1"))
    assert views.get("uid-a", "n1") is None


def test_a_pod_without_a_placement_view_stays() -> None:
    assert exclusion(None, Descheduling(action="Evict"), Exclusions(), datetime.datetime.now(datetime.UTC)) == (
        "unknown-pod"
    )
