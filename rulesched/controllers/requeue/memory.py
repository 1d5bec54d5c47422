"""The requeue controller's memory: the pods this replica rejected, bounded, timed, and what changed since.

A filter call that leaves a pod no passing node hands the pod and its candidates' names here (after the
answer is sent); the pod is remembered until it is asked about again, seen bound, forgotten on a 404 or
409 of its nudge, or `ttl` seconds old, and never more than `kept` pods (the oldest go first). Every change
of an input (`Change`: a metrics poll, Prometheus values, nodes, pods on a node, a rules reload) is marked
on every remembered pod as work to do: which candidates to evaluate again (`None`: all of them). The
requeue controller (`controller.py`) takes a bounded number of marked pods per step.

Thread-safe: the event loop remembers and evaluates, the nudge thread forgets.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.rules.pod_values import pod_identity


@dataclass(frozen=True, slots=True)
class Change:
    """An input changed: its kind (rules, metrics, prometheus, nodes, pods), when (`time.monotonic()`), and
    the nodes it concerns (None: any node)."""

    kind: str
    at: float
    nodes: frozenset[str] | None = None


@dataclass(slots=True)
class Rejected:
    """One remembered pod: the pod as kube-scheduler sent it, its candidates, and the work a change left."""

    key: str
    pod: Mapping[str, Any]
    names: tuple[str, ...]
    since: float
    """When it was remembered (`time.monotonic()`)."""
    change: Change | None = None
    """The first change not yet evaluated (its time is the nudge delay's start); None: nothing to do."""
    nodes: set[str] | None = field(default_factory=set)
    """The candidates to evaluate again (None: every candidate)."""
    nudged: bool = False
    """A nudge was sent: nothing more is done until kube-scheduler asks about the pod again."""

    def candidates(self) -> list[str]:
        """The names to evaluate again, in the request's order."""
        if self.nodes is None:
            return list(self.names)
        return [name for name in self.names if name in self.nodes]


def rejected_key(pod: Mapping[str, Any]) -> str:
    """`namespace/name/uid`: a pod re-created under its name is another pod."""
    identity = pod_identity(pod)
    return f"{identity['namespace']}/{identity['name']}/{identity.get('uid') or ''}"


class RejectedPods:
    """The bounded, timed set of rejected pods, oldest first."""

    def __init__(self, kept: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.kept, self.ttl, self.clock = kept, ttl, clock
        self._pods: OrderedDict[str, Rejected] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, pod: Mapping[str, Any], names: Sequence[str]) -> None:
        key = rejected_key(pod)
        with self._lock:
            self._pods.pop(key, None)
            self._pods[key] = Rejected(key, pod, tuple(names), self.clock())
            while len(self._pods) > self.kept:
                self._pods.popitem(last=False)

    def forget(self, key: str) -> None:
        with self._lock:
            self._pods.pop(key, None)

    def size(self) -> int:
        return len(self._pods)

    def holds(self, key: str) -> bool:
        """Whether the pod is still remembered (not asked about again, seen bound, expired or forgotten)."""
        with self._lock:
            return key in self._pods

    def remembered(self) -> list[tuple[str, Mapping[str, Any]]]:
        """Every remembered pod's key and pod, oldest first."""
        with self._lock:
            return [(key, rejected.pod) for key, rejected in self._pods.items()]

    def expire(self) -> int:
        """Forget the pods remembered `ttl` seconds ago or earlier; how many were."""
        limit = self.clock() - self.ttl
        expired = 0
        with self._lock:
            while self._pods and next(iter(self._pods.values())).since <= limit:
                self._pods.popitem(last=False)
                expired += 1
        return expired

    def mark(self, change: Change) -> int:
        """Every pod not yet nudged has `change` to evaluate; how many pods were marked."""
        marked = 0
        with self._lock:
            for rejected in self._pods.values():
                if rejected.nudged:
                    continue
                if rejected.change is None:
                    rejected.change, rejected.nodes = change, set()
                if change.nodes is None or rejected.nodes is None:
                    rejected.nodes = None
                else:
                    rejected.nodes |= change.nodes
                marked += 1
        return marked

    def take(self, most: int) -> list[Rejected]:
        """Up to `most` marked pods, oldest first, unmarked (their work handed to the caller)."""
        taken: list[Rejected] = []
        with self._lock:
            for rejected in self._pods.values():
                if len(taken) >= most:
                    break
                if rejected.change is not None and not rejected.nudged:
                    taken.append(Rejected(rejected.key, rejected.pod, rejected.names, rejected.since,
                                          rejected.change, rejected.nodes))  # fmt: skip
                    rejected.change, rejected.nodes = None, set()
        return taken

    def retry(self, key: str) -> None:
        """The pod's nudge was not sent: the next change may nudge it again."""
        with self._lock:
            rejected = self._pods.get(key)
            if rejected is not None:
                rejected.nudged = False

    def nudged(self, key: str) -> bool:
        """Mark the pod nudged; False when it was forgotten meanwhile (asked again, bound, expired)."""
        with self._lock:
            rejected = self._pods.get(key)
            if rejected is None:
                return False
            rejected.nudged = True
            return True


class TokenBucket:
    """At most `rate` takes a second on average, `burst` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._tokens = float(burst)
        self._at = clock()

    def _fill(self) -> None:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now

    def take(self) -> bool:
        """One token, if there is one."""
        self._fill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait(self) -> float:
        """Seconds until the next token."""
        self._fill()
        return max(0.0, (1.0 - self._tokens) / self.rate)
