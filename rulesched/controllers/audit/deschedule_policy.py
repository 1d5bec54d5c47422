"""Which violating pods may be evicted, and how often: the exclusions, the rates and the cool-down.

The exclusions read the pod's placement view (`placement_view.placement_view`: read from the whole pod, never
cut off) and fail closed: a pod without one (not in the pod cache, beyond its bound, or too large to check)
stays. A pod is never evicted when it has no controller (a bare pod: nothing would re-create it), when its
controller is a DaemonSet (it would come back on the same node) or a Node (a mirror pod of a static pod,
as is any pod with the `kubernetes.io/config.mirror` annotation), when its namespace is excluded
(`--deschedule-excluded-namespaces`, kube-system by default), when it is annotated
`rulesched.io/deschedule: "false"`, when it is already terminating, or when it was placed less than the rule
set's `minAgeSeconds` ago (its PodScheduled condition, else its start time; neither: too young). Unless a
setting allows it, neither is a system-critical pod (priority at least 2000000000, or a `system-` priority
class), a pod with local storage (emptyDir, hostPath), a pod with PersistentVolumeClaims (or generic
ephemeral volumes, which are claims), nor a pod whose placement elsewhere the descheduler cannot check
(inter-pod affinity or anti-affinity, topology spread constraints; `fit.py` says what it checks).

Evictions are paced by token buckets, one for all rule sets (`--deschedule-rate`) and one per rule set
(`maxEvictionsPerMinute`); a pod tried once is not tried again within `--deschedule-cooldown`.
"""

from __future__ import annotations

import datetime
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.cluster.pods.placement_view import MIRROR, OPT_OUT
from rulesched.cluster.sources import parse_timestamp
from rulesched.rules.model import Descheduling

REMEMBERED = 10_000
"""Most pods whose last attempt (and last state) the descheduler remembers; the oldest are forgotten first."""
SYSTEM_CRITICAL = 2_000_000_000
"""kube-scheduler's `SystemCriticalPriority`: the priority of `system-cluster-critical` and above."""
_CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")
_LOCAL = ("emptyDir", "hostPath")
_CLAIMS = ("persistentVolumeClaim", "ephemeral")


@dataclass(frozen=True, slots=True)
class Exclusions:
    """What is never evicted, and what may be when a setting allows it (`--deschedule-*`)."""

    namespaces: tuple[str, ...] = ("kube-system",)
    system_critical: bool = False
    local_storage: bool = False
    claims: bool = False
    unchecked_placement: bool = False
    """Pods with inter-pod (anti-)affinity or topology spread: kube-scheduler's check of those is not made."""


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def exclusion(
    view: Mapping[str, Any] | None, policy: Descheduling, allowed: Exclusions, now: datetime.datetime
) -> str | None:
    """Why the pod (its placement view; None: none is known) must stay, or None when it may go."""
    if view is None:
        return "unknown-pod"
    if view.get("oversized"):
        return "too-large-to-check"
    return _ownership(view, allowed) or _contents(view, allowed) or _age(view, policy, now)


def _ownership(view: Mapping[str, Any], allowed: Exclusions) -> str | None:
    metadata = _map(view.get("metadata"))
    annotations = _map(metadata.get("annotations"))
    controllers = metadata.get("controllers") or []
    if MIRROR in annotations or any(o.get("kind") == "Node" for o in controllers):
        return "mirror-pod"
    if not controllers:
        return "no-controller"
    if controllers[0].get("kind") == "DaemonSet":
        return "daemonset"
    if (metadata.get("namespace") or "default") in allowed.namespaces:
        return "excluded-namespace"
    if str(annotations.get(OPT_OUT, "")).lower() == "false":
        return "opted-out"
    if metadata.get("deletionTimestamp"):
        return "terminating"
    return None


def _contents(view: Mapping[str, Any], allowed: Exclusions) -> str | None:
    spec = _map(view.get("spec"))
    priority = spec.get("priority")
    critical = isinstance(priority, int) and priority >= SYSTEM_CRITICAL
    if (critical or spec.get("priorityClassName") in _CRITICAL_CLASSES) and not allowed.system_critical:
        return "system-critical"
    kinds = {kind for volume in spec.get("volumes") or [] for kind in volume}
    if kinds & set(_LOCAL) and not allowed.local_storage:
        return "local-storage"
    if kinds & set(_CLAIMS) and not allowed.claims:
        return "persistent-volume-claim"
    affinity = _map(spec.get("affinity"))
    unchecked = affinity.get("podAffinity") or affinity.get("podAntiAffinity") or spec.get("topologySpreadConstraints")
    if unchecked and not allowed.unchecked_placement:
        return "unchecked-placement"
    return None


def _age(view: Mapping[str, Any], policy: Descheduling, now: datetime.datetime) -> str | None:
    if policy.minAgeSeconds <= 0:
        return None
    placed = parse_timestamp(view.get("scheduledAt"))
    if placed is None or (now - placed).total_seconds() < policy.minAgeSeconds:
        return "too-young"
    return None


class Rate:
    """A token bucket: `per_minute` tokens a minute, at most one held (no bursts). Times are monotonic seconds."""

    def __init__(self, per_minute: float, now: float) -> None:
        self.per_minute = per_minute
        self._tokens = 1.0
        self._at = now

    def allows(self, now: float) -> bool:
        self._tokens = min(1.0, self._tokens + (now - self._at) * self.per_minute / 60.0)
        self._at = now
        return self._tokens >= 1.0

    def take(self) -> None:
        self._tokens -= 1.0


class Memory:
    """Per pod uid, the last value recorded (an attempt's time, a state), the oldest forgotten beyond `kept`."""

    def __init__(self, kept: int = REMEMBERED) -> None:
        self.kept = kept
        self._values: OrderedDict[str, Any] = OrderedDict()

    def get(self, uid: str) -> Any:
        return self._values.get(uid)

    def put(self, uid: str, value: Any) -> None:
        self._values.pop(uid, None)
        self._values[uid] = value
        while len(self._values) > self.kept:
            self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)
