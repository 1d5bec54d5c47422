"""Would kube-scheduler place this pod on that node? Its own node checks, as plain functions over dict pods and nodes.

The descheduler evicts a pod only when another node passes both the pod's rulesched filters and these checks,
ported from kube-scheduler's Filter plugins (v1.32-v1.36) and the Kubernetes descheduler's `PodFitsAnyOtherNode`:

- `NodeName`: a pod whose own spec names a node fits only there;
- `NodeAffinity`: `spec.nodeSelector` (every label equal) and the required node affinity (its terms ORed,
  each term's expressions ANDed; an empty term, or one that cannot be parsed, matches nothing; operators
  In, NotIn, Exists, DoesNotExist, Gt, Lt on labels, In and NotIn on the field `metadata.name`),
  as `component-helpers/scheduling/corev1/nodeaffinity`;
- `TaintToleration`: every NoSchedule and NoExecute taint tolerated (PreferNoSchedule only scores);
- `NodeUnschedulable`: a cordoned node, unless the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`;
- not Ready: the node's Ready condition is not True (the descheduler's check; the node lifecycle
  controller's `node.kubernetes.io/not-ready` taint is a taint like any other);
- `NodeResourcesFit`: the pod's requests (`pod_values.pod_requests`: containers, init containers' peak,
  sidecars, overhead) within the node's allocatable minus what its pods request, and one more pod
  within its `pods`.

Not covered (the descheduler judges pods that have them apart): inter-pod (anti-)affinity, topology spread,
volume binding and limits, ports, images, dynamic resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rulesched.rules.quantity import QuantityError, parse_quantity

Obj = Mapping[str, Any]
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_CHECKED_EFFECTS = ("NoSchedule", "NoExecute")
_PLAIN_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_EPSILON = 1e-9
"""Requests are summed as floats: a request equal to what is free fits."""


@dataclass(frozen=True, slots=True)
class NodeUse:
    """What a node's pods take: how many there are and the sum of their requests."""

    pods: int = 0
    requests: Mapping[str, float] = field(default_factory=dict)


def _map(value: object) -> Obj:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _labels(node: Obj) -> Obj:
    return _map(_map(node.get("metadata")).get("labels"))


# -- NodeAffinity ----------------------------------------------------------------------------------------


def _integer(text: object) -> int | None:
    """A value Go's `strconv.ParseInt(text, 10, 64)` accepts, else None."""
    if not isinstance(text, str):
        return None
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit():
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _label_requirement(expression: Obj, labels: Obj) -> bool | None:
    """Whether the labels meet one matchExpression (None: it cannot be parsed, as `labels.NewRequirement`)."""
    key, operator, values = str(expression.get("key")), expression.get("operator"), _list(expression.get("values"))
    present = key in labels
    if operator in ("In", "NotIn"):
        if not values:
            return None
        inside = present and labels[key] in values
        return inside if operator == "In" else not inside
    if operator in ("Exists", "DoesNotExist"):
        if values:
            return None
        return present if operator == "Exists" else not present
    if operator in ("Gt", "Lt"):
        bound = _integer(values[0]) if len(values) == 1 else None
        if bound is None:
            return None
        value = _integer(labels.get(key)) if present else None
        return value is not None and (value > bound if operator == "Gt" else value < bound)
    return None


def _field_requirement(expression: Obj, node: Obj) -> bool | None:
    """Whether the node meets one matchFields entry (only In and NotIn of one value; the only field a node
    has is `metadata.name`)."""
    values = _list(expression.get("values"))
    operator = expression.get("operator")
    if operator not in ("In", "NotIn") or len(values) != 1:
        return None
    name = _map(node.get("metadata")).get("name") if expression.get("key") == "metadata.name" else None
    equal = (name or "") == values[0]
    return equal if operator == "In" else not equal


def _term_matches(term: Obj, node: Obj) -> bool:
    """One nodeSelectorTerm: an empty term, or one with an expression that cannot be parsed, matches nothing."""
    expressions, fields = _list(term.get("matchExpressions")), _list(term.get("matchFields"))
    if not expressions and not fields:
        return False
    labels = _labels(node)
    results = [_label_requirement(_map(e), labels) for e in expressions]
    results += [_field_requirement(_map(e), node) for e in fields]
    return None not in results and all(results)


def required_affinity_matches(pod: Obj, node: Obj) -> bool:
    """`NodeAffinity`'s Filter: the pod's nodeSelector and required node affinity."""
    spec = _map(pod.get("spec"))
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in _map(spec.get("nodeSelector")).items()):
        return False
    affinity = _map(_map(spec.get("affinity")).get("nodeAffinity"))
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, Mapping):
        return True
    return any(_term_matches(_map(term), node) for term in _list(required.get("nodeSelectorTerms")))


# -- TaintToleration and NodeUnschedulable ---------------------------------------------------------------


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """`Toleration.ToleratesTaint`: effect (empty: any), key (empty: any), and Equal, Exists, Lt or Gt."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt"):
        wanted, value = _integer(toleration.get("value")), _integer(taint.get("value"))
        if wanted is None or value is None:
            return False
        return value < wanted if operator == "Lt" else value > wanted
    return False


def untolerated_taint(pod: Obj, node: Obj) -> Obj | None:
    """The first NoSchedule or NoExecute taint of the node the pod does not tolerate, else None."""
    tolerations = [_map(t) for t in _list(_map(pod.get("spec")).get("tolerations"))]
    for taint in _list(_map(node.get("spec")).get("taints")):
        taint = _map(taint)
        if taint.get("effect") in _CHECKED_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def unschedulable(pod: Obj, node: Obj) -> bool:
    """`NodeUnschedulable`: the node is cordoned and the pod does not tolerate it."""
    if not _map(node.get("spec")).get("unschedulable"):
        return False
    taint = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    return not any(tolerates(_map(t), taint) for t in _list(_map(pod.get("spec")).get("tolerations")))


def ready(node: Obj) -> bool:
    """The node's Ready condition is True."""
    conditions = _list(_map(node.get("status")).get("conditions"))
    return any(_map(c).get("type") == "Ready" and _map(c).get("status") == "True" for c in conditions)


# -- NodeResourcesFit ------------------------------------------------------------------------------------


def _checked(name: str) -> bool:
    """Resources NodeResourcesFit compares: cpu, memory, ephemeral storage and the scalar ones (extended
    resources such as `nvidia.com/gpu`, `hugepages-*`, `attachable-volumes-*`)."""
    return name in _PLAIN_RESOURCES or "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def _quantity(value: object) -> float:
    try:
        return float(parse_quantity(str(value))) if isinstance(value, (str, int, float)) else 0.0
    except QuantityError:
        return 0.0


def insufficient(requests: Mapping[str, float], node: Obj, use: NodeUse) -> list[str]:
    """The resources the node lacks for the pod (`Insufficient cpu`, `Too many pods`), as NodeResourcesFit."""
    allocatable = _map(_map(node.get("status")).get("allocatable"))
    found = []
    if use.pods + 1 > _quantity(allocatable.get("pods")):
        found.append("Too many pods")
    for name, wanted in sorted(requests.items()):
        if wanted <= 0 or not _checked(name):
            continue
        free = _quantity(allocatable.get(name)) - use.requests.get(name, 0.0)
        if wanted > free + _EPSILON:
            found.append(f"Insufficient {name}")
    return found


def pod_level_requests(pod: Obj, requests: Mapping[str, float]) -> dict[str, float]:
    """`requests` with the pod-level `spec.resources.requests` in their place where the pod sets them (cpu,
    memory: kube-scheduler's PodLevelResources), plus its overhead as a container-level total would have."""
    level = _map(_map(_map(pod.get("spec")).get("resources")).get("requests"))
    overhead = _map(_map(pod.get("spec")).get("overhead"))
    found = dict(requests)
    for name in ("cpu", "memory"):
        if name in level:
            found[name] = _quantity(level[name]) + _quantity(overhead.get(name))
    return found


# -- all together ----------------------------------------------------------------------------------------


def node_misfit(pod: Obj, node: Obj) -> str | None:
    """Why kube-scheduler would not place the pod on the node, resources apart (the first reason), or None."""
    name = _map(node.get("metadata")).get("name")
    wanted = _map(pod.get("spec")).get("nodeName")
    if wanted and wanted != name:
        return "node name"
    if not required_affinity_matches(pod, node):
        return "node affinity"
    if unschedulable(pod, node):
        return "unschedulable"
    if not ready(node):
        return "not ready"
    taint = untolerated_taint(pod, node)
    return f"untolerated taint {taint.get('key')}" if taint is not None else None


def misfit(pod: Obj, requests: Mapping[str, float], node: Obj, use: NodeUse) -> str | None:
    """Why kube-scheduler would not place the pod on the node (the first reason found), or None when it would."""
    reason = node_misfit(pod, node)
    if reason is not None:
        return reason
    lacking = insufficient(pod_level_requests(pod, requests), node, use)
    return ", ".join(lacking) if lacking else None
