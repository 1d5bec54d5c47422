"""kube-scheduler's own filters and default score plugins, as `rulesched tune` models them.

The formulas are kube-scheduler's (v1.32 to v1.36, `pkg/scheduler/framework/plugins/`), in its integer
arithmetic: millicores and bytes, each plugin's score 0..`MAX_NODE_SCORE` after its normalization, times the
plugin's weight, summed; an extender's score (0..`MAX_EXTENDER_PRIORITY`) counts `MAX_NODE_SCORE /
MAX_EXTENDER_PRIORITY` times the extender's weight. Modelled: the filters NodeUnschedulable, NodeName,
TaintToleration (NoSchedule, NoExecute), NodeAffinity (nodeSelector, required terms), these four as the
descheduler checks them (`cluster/fit.py`), and NodeResourcesFit (cpu, memory, pods); the scores NodeResourcesFit
(LeastAllocated), NodeResourcesBalancedAllocation, TaintToleration, NodeAffinity (preferred terms),
ImageLocality and PodTopologySpread's system default constraints for pods of a controller. Not modelled:
InterPodAffinity, volume plugins, NodePorts, dynamic resources and a pod's own topology spread constraints
(docs/guides/tuning-weights.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.cluster import fit
from rulesched.rules.context import allocatable_numbers
from rulesched.rules.pod_values import pod_requests

MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10
DEFAULT_WEIGHTS: Mapping[str, int] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
"""The default profile's score plugins and weights (`pkg/scheduler/apis/config/v1/default_plugins.go`)."""
NON_ZERO_CPU, NON_ZERO_MEMORY = 100, 200 * 1024 * 1024
"""What LeastAllocated counts for a container that requests no cpu (millicores) or memory (bytes)."""
HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
DEFAULT_SPREAD = ((HOSTNAME, 3), (ZONE, 5))
"""The system default topology spread constraints (ScheduleAnyway): topology key and maxSkew."""
MB = 1024 * 1024
_IMAGE_MIN, _IMAGE_MAX = 23 * MB, 1000 * MB


@dataclass(frozen=True, slots=True)
class Demand:
    """What a pod asks for, in kube-scheduler's units: millicores and bytes, with and without the defaults
    for containers that request nothing."""

    cpu: int
    memory: int
    nonzero_cpu: int
    nonzero_memory: int

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> Demand:
        requests = pod_requests(pod)
        cpu, memory = round(requests.get("cpu", 0.0) * 1000), round(requests.get("memory", 0.0))
        containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping)]
        nonzero_cpu = nonzero_memory = 0
        for container in containers or [{}]:
            own = pod_requests({"spec": {"containers": [container]}})
            nonzero_cpu += round(own["cpu"] * 1000) if own.get("cpu") else NON_ZERO_CPU
            nonzero_memory += round(own["memory"]) if own.get("memory") else NON_ZERO_MEMORY
        return cls(cpu, memory, nonzero_cpu, nonzero_memory)

    @classmethod
    def of_requests(cls, requests: Mapping[str, float]) -> Demand:
        """From a pod view's summed `requests` (its containers are not kept: the defaults count once)."""
        cpu, memory = round(requests.get("cpu", 0.0) * 1000), round(requests.get("memory", 0.0))
        return cls(cpu, memory, cpu or NON_ZERO_CPU, memory or NON_ZERO_MEMORY)


@dataclass(slots=True)
class NodeState:
    """One node as kube-scheduler's snapshot holds it: the object, what its pods request, their owners."""

    node: Mapping[str, Any]
    cpu: int = 0
    memory: int = 0
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    pods: int = 0
    owners: dict[str, int] | None = None

    def add(self, demand: Demand, owner: str | None) -> None:
        self.cpu += demand.cpu
        self.memory += demand.memory
        self.nonzero_cpu += demand.nonzero_cpu
        self.nonzero_memory += demand.nonzero_memory
        self.pods += 1
        if owner is not None:
            self.owners = self.owners or {}
            self.owners[owner] = self.owners.get(owner, 0) + 1

    capacity: tuple[int, int, int] | None = None

    def allocatable(self) -> tuple[int, int, int]:
        """Millicores, bytes and pods the node offers (parsed once)."""
        if self.capacity is None:
            numbers = allocatable_numbers((self.node.get("status") or {}).get("allocatable"))
            cpu, memory = round(numbers.get("cpu", 0.0) * 1000), round(numbers.get("memory", 0.0))
            self.capacity = cpu, memory, int(numbers.get("pods", 110))
        return self.capacity


def owner_of(pod: Mapping[str, Any]) -> str | None:
    """The pod's first owner (its uid, else kind/name), as PodTopologySpread counts the pods of a controller."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if not owners or not isinstance(owners[0], Mapping):
        return None
    first = owners[0]
    return str(first.get("uid") or f"{first.get('kind')}/{first.get('name')}")


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _affinity(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}


def fits(pod: Mapping[str, Any], demand: Demand, state: NodeState) -> bool:
    """kube-scheduler's filters that a node object and the requests on it decide (the node checks are the
    descheduler's, `cluster/fit.py`, less its Ready condition, which kube-scheduler does not read)."""
    node, spec = state.node, pod.get("spec") or {}
    if spec.get("nodeName") and spec["nodeName"] != (node.get("metadata") or {}).get("name"):
        return False
    if fit.unschedulable(pod, node) or fit.untolerated_taint(pod, node) is not None:
        return False
    if not fit.required_affinity_matches(pod, node):
        return False
    cpu, memory, pods = state.allocatable()
    return state.cpu + demand.cpu <= cpu and state.memory + demand.memory <= memory and state.pods < pods


def _least(requested: int, capacity: int) -> int:
    return 0 if capacity == 0 or requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity


def _least_allocated(demand: Demand, state: NodeState) -> int:
    """LeastAllocated over cpu and memory (weight 1 each), by the non-zero requests."""
    cpu, memory, _ = state.allocatable()
    used_cpu, used_memory = state.nonzero_cpu + demand.nonzero_cpu, state.nonzero_memory + demand.nonzero_memory
    return (_least(used_cpu, cpu) + _least(used_memory, memory)) // 2


def _balanced(demand: Demand, state: NodeState) -> int:
    cpu, memory, _ = state.allocatable()
    fractions = [
        min(1.0, requested / capacity)
        for requested, capacity in ((state.cpu + demand.cpu, cpu), (state.memory + demand.memory, memory))
        if capacity
    ]
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def _normalized(raw: Sequence[int], reverse: bool) -> list[int]:
    """kube-scheduler's DefaultNormalizeScore."""
    top = max(raw, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0 for _ in raw]
    scaled = [MAX_NODE_SCORE * r // top for r in raw]
    return [MAX_NODE_SCORE - s for s in scaled] if reverse else scaled


def _preferred_taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "PreferNoSchedule"]


def _taint_scores(pod: Mapping[str, Any], states: Sequence[NodeState]) -> list[int]:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    raw = [
        sum(1 for t in _preferred_taints(s.node) if not any(fit.tolerates(o, t) for o in tolerations)) for s in states
    ]
    return _normalized(raw, reverse=True)


def _affinity_scores(pod: Mapping[str, Any], states: Sequence[NodeState]) -> list[int]:
    preferred = _affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    raw = [
        sum(int(p.get("weight", 0)) for p in preferred if fit.term_matches(p.get("preference") or {}, s.node))
        for s in states
    ]
    return _normalized(raw, reverse=False)


def _image_scores(pod: Mapping[str, Any], states: Sequence[NodeState], total_nodes: int) -> list[int]:
    containers = (pod.get("spec") or {}).get("containers") or []
    wanted = {c.get("image") for c in containers if c.get("image")}
    having: dict[str, int] = {}
    sizes: list[dict[str, int]] = []
    for state in states:
        held = {}
        for image in (state.node.get("status") or {}).get("images") or []:
            for name in image.get("names") or []:
                held[name] = int(image.get("sizeBytes", 0))
        sizes.append(held)
        for name in wanted & set(held):
            having[name] = having.get(name, 0) + 1
    top = _IMAGE_MAX * max(1, len(containers))
    scores = []
    for held in sizes:
        total = sum(held[n] * having[n] / max(1, total_nodes) for n in wanted & set(held))
        total = min(max(total, _IMAGE_MIN), top)
        scores.append(int(MAX_NODE_SCORE * (total - _IMAGE_MIN) / (top - _IMAGE_MIN)))
    return scores


def _spread_scores(pod: Mapping[str, Any], states: Sequence[NodeState]) -> list[int] | None:
    """PodTopologySpread with the system default constraints, for a pod of a controller (None: skipped)."""
    owner = owner_of(pod)
    if owner is None or (pod.get("spec") or {}).get("topologySpreadConstraints"):
        return None
    raw = []
    zones: dict[str, int] = {}
    for state in states:
        zone = _labels(state.node).get(ZONE)
        if zone is not None:
            zones[zone] = zones.get(zone, 0) + (state.owners or {}).get(owner, 0)
    for state in states:
        labels, score = _labels(state.node), 0.0
        if HOSTNAME in labels:
            count = (state.owners or {}).get(owner, 0)
            score += count * math.log(len(states) + 2) + DEFAULT_SPREAD[0][1] - 1
        if ZONE in labels:
            score += zones[labels[ZONE]] * math.log(len(zones) + 2) + DEFAULT_SPREAD[1][1] - 1
        raw.append(round(score))
    low, high = min(raw), max(raw)
    return [MAX_NODE_SCORE if high == 0 else MAX_NODE_SCORE * (high + low - r) // high for r in raw]


def plugin_scores(
    pod: Mapping[str, Any], demand: Demand, states: Sequence[NodeState], weights: Mapping[str, int], total: int
) -> list[int]:
    """Each candidate's weighted sum of the modelled score plugins (`weights`: by plugin name; 0 disables)."""
    parts: dict[str, list[int] | None] = {
        "NodeResourcesFit": [_least_allocated(demand, s) for s in states],
        "NodeResourcesBalancedAllocation": (
            None if demand.cpu == 0 and demand.memory == 0 else [_balanced(demand, s) for s in states]
        ),
        "TaintToleration": _taint_scores(pod, states),
        "NodeAffinity": _affinity_scores(pod, states),
        "ImageLocality": _image_scores(pod, states, total),
        "PodTopologySpread": _spread_scores(pod, states),
    }
    sums = [0] * len(states)
    for name, scores in parts.items():
        weight = weights.get(name, 0)
        if scores is None or not weight:
            continue
        sums = [t + weight * s for t, s in zip(sums, scores, strict=True)]
    return sums


def extender_part(score: int, weight: float) -> float:
    """What an extender's score adds to a node's total in kube-scheduler."""
    return score * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
