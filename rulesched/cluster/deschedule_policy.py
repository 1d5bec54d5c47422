"""Which violating pods may be evicted, and how often: the exclusions, the rates and the cool-down.

A pod is never evicted when it has no controller (a bare pod: nothing would re-create it), when its
controller is a DaemonSet (it would come back on the same node) or a Node (a mirror pod of a static pod,
as is any pod with the `kubernetes.io/config.mirror` annotation), when its namespace is excluded
(`--deschedule-excluded-namespaces`, kube-system by default), when it is annotated
`rulesched.io/deschedule: "false"`, or when it was created less than the rule set's `minAgeSeconds` ago.
Evictions are paced by token buckets, one for all rule sets (`--deschedule-rate`) and one per rule set
(`maxEvictionsPerMinute`); a pod tried once is not tried again within `--deschedule-cooldown`.
"""

from __future__ import annotations

import datetime
from collections import OrderedDict
from collections.abc import Collection, Mapping
from typing import Any

from rulesched.cluster.sources import parse_timestamp
from rulesched.rules.model import Descheduling

OPT_OUT = "rulesched.io/deschedule"
"""The annotation that keeps a pod from being evicted by rulesched, with the value "false"."""
MIRROR = "kubernetes.io/config.mirror"
REMEMBERED = 10_000
"""Most pods whose last attempt (and last state) the descheduler remembers; the oldest are forgotten first."""


def exclusion(
    view: Mapping[str, Any], policy: Descheduling, excluded: Collection[str], now: datetime.datetime
) -> str | None:
    """Why the pod (a pod cache view) must stay, or None when it may go."""
    metadata = view.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    controllers = [o for o in metadata.get("ownerReferences") or [] if o.get("controller")]
    if MIRROR in annotations or any(o.get("kind") == "Node" for o in controllers):
        return "mirror-pod"
    if not controllers:
        return "no-controller"
    if controllers[0].get("kind") == "DaemonSet":
        return "daemonset"
    if (metadata.get("namespace") or "default") in excluded:
        return "excluded-namespace"
    if str(annotations.get(OPT_OUT, "")).lower() == "false":
        return "opted-out"
    created = parse_timestamp(metadata.get("creationTimestamp"))
    if created is None or (now - created).total_seconds() < policy.minAgeSeconds:
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
