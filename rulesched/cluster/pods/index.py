"""The pods on each node and the pod's namespace: what `pods`, `allocated`, `recent` and `namespaceObject` read.

`PodIndex` keeps the assigned, non-terminal pods by node, as trimmed views (`rules.pod_values.pod_view`), and
the placements this extender has made that the pods it knows do not show yet (a node ranked first by
/prioritize, a binding sent through /bind). A placement is pending until the pod shows up bound (anywhere:
it then counts where it really went), or until `recent_seconds` have passed. Every change is recorded in
a `ChangeLog` by node name, so that only that node's context is rebuilt. The file sources (`--pods`,
`--namespaces`) and the live caches (`podcache.py`) all keep their pods in a `PodIndex`.
"""

from __future__ import annotations

import datetime
import heapq
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rulesched.cluster.changelog import ChangeLog
from rulesched.cluster.sources import items_of, parse_timestamp
from rulesched.rules.context import NodePods, node_pods
from rulesched.rules.pod_values import pod_view

log = logging.getLogger(__name__)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_MAX_VERSIONS = 100_000
"""Nodes whose pod version is counted apart; beyond, every node's version moves at once."""


class PodSource(Protocol):
    def version_of(self, node: str) -> Hashable:
        """A value that changes whenever `node_pods(node, …)` may answer differently; cheap, never blocks."""

    def node_pods(self, node: str, sampled: datetime.datetime | None) -> NodePods:
        """The pods on `node`; `recent` counts those placed after `sampled` (the node's metrics sample;
        None: within the last `recent_seconds`). Never blocks."""

    def generation(self) -> int:
        """A number that grows whenever `node_pods` may answer differently for some node."""

    def changed_since(self, generation: int) -> set[str] | None:
        """The nodes whose pods may have changed since `generation`; None when every node may have."""

    def reserve(self, pod: Mapping[str, Any], node: str) -> None:
        """This extender placed `pod` on `node` (ranked it first, or bound it there)."""

    def forget(self, pod: Mapping[str, Any]) -> None:
        """`pod` is being scheduled again: its pending placement, if any, no longer holds."""

    def ranked(self, pod: Mapping[str, Any]) -> None:
        """`pod` was ranked without one node first (a tie): if it is bound through /bind, count its requests."""

    def ready(self) -> bool: ...

    def size(self) -> int: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class NamespaceSource(Protocol):
    def get(self, name: str) -> Mapping[str, Any] | None:
        """The Namespace called `name` (trimmed), if known; never blocks."""

    def ready(self) -> bool: ...

    def size(self) -> int: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Placed:
    """One pod on a node: its view and when it was placed there."""

    node: str
    view: Mapping[str, Any]
    placed: datetime.datetime
    estimate: Mapping[str, float] | None = None
    """What the pod was expected to use when it was placed (`recent.estimates`); None: its requests."""


Estimator = Callable[[Mapping[str, Any], Mapping[str, float] | None], Mapping[str, float]]
"""A pod's (or a pod view's) `estimate`, given its requests when known (`cluster.usage.store.UsageStore.estimate`)."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def pod_key(pod: Mapping[str, Any]) -> str:
    """The pod's uid, or `namespace/name` when it has none (a hand-written pod); "" for neither."""
    metadata = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    uid = metadata.get("uid")
    if isinstance(uid, str) and uid:
        return uid
    name = metadata.get("name")
    return f"{metadata.get('namespace') or 'default'}/{name}" if isinstance(name, str) and name else ""


def assigned_node(pod: Mapping[str, Any]) -> str:
    """The node of an assigned, non-terminal pod; "" for any other pod."""
    spec, status = pod.get("spec"), pod.get("status")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return node if isinstance(node, str) and node and phase not in TERMINAL_PHASES else ""


def placed_at(pod: Mapping[str, Any], default: datetime.datetime) -> datetime.datetime:
    """When the pod was bound: its `PodScheduled=True` condition's time, else its creation (a pod created
    with `nodeName`), else `default`."""
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    for condition in status.get("conditions") or []:
        scheduled = isinstance(condition, Mapping) and condition.get("type") == "PodScheduled"
        if scheduled and condition.get("status") == "True":
            found = parse_timestamp(condition.get("lastTransitionTime"))
            if found is not None:
                return found
    metadata = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    return parse_timestamp(metadata.get("creationTimestamp")) or default


class PodIndex:
    """Assigned non-terminal pods by node, and this extender's pending placements. Thread-safe.

    Bounded: at most `max_pods` pods (more are left out, and `overflowed` says so) and `max_pending`
    pending placements (the oldest go first)."""

    def __init__(self, *, recent_seconds: float = 30.0, max_pods: int = 200_000, max_pending: int = 10_000) -> None:
        self.recent_seconds = recent_seconds
        self.max_pods = max_pods
        self.max_pending = max_pending
        self.overflowed = False
        self._pods: dict[str, Placed] = {}
        self._by_node: dict[str, dict[str, Placed]] = {}
        self._pending: OrderedDict[str, Placed] = OrderedDict()
        self._pending_by_node: dict[str, dict[str, Placed]] = {}
        self._ranked: OrderedDict[str, Mapping[str, Any]] = OrderedDict()
        """Views of pods ranked with a tie at the top, for a binding that names the pod only (`max_pending`)."""
        self._epoch = 0
        self._versions: dict[str, int] = {}
        self._expiries: list[tuple[datetime.datetime, str]] = []
        """When a node's `recent` may shrink without an event: (time, node), a heap."""
        self._changes = ChangeLog()
        self._lock = threading.Lock()
        self.estimator: Estimator | None = None
        """Where `recent.estimates` come from (set once the usage store exists); None: requests."""

    # -- what the contexts read -------------------------------------------------------------------------

    def node_pods(self, node: str, sampled: datetime.datetime | None) -> NodePods:
        with self._lock:
            on_node = list(self._by_node.get(node, {}).values())
            pending = list(self._pending_by_node.get(node, {}).values())
            version = self._version(node)
        if not on_node and not pending:
            return NodePods(version=version)
        now = _now()
        window = now - datetime.timedelta(seconds=self.recent_seconds)
        cutoff = sampled or window
        views = [p.view for p in on_node]
        counted = [p for p in on_node if p.placed > cutoff] + [p for p in pending if p.placed > window]
        estimates = [p.estimate if p.estimate is not None else p.view["requests"] for p in counted]
        return node_pods(views, [p.view for p in counted], version, estimates)

    def views(self) -> list[Mapping[str, Any]]:
        """Every pod's view (a copy of the list): how the usage poller finds the sampled pods' workloads."""
        with self._lock:
            return [p.view for p in self._pods.values()]

    def _estimate(self, pod: Mapping[str, Any], view: Mapping[str, Any]) -> Mapping[str, float] | None:
        """The estimate of `pod` (whole or its `view`): its requests from the view, not parsed again."""
        return self.estimator(pod, view.get("requests")) if self.estimator is not None else None

    def version_of(self, node: str) -> Hashable:
        """A value that changes whenever `node_pods(node, …)` may answer differently; cheap."""
        return self._version(node)

    def _version(self, node: str) -> tuple[int, int]:
        return self._epoch, self._versions.get(node, 0)

    def generation(self) -> int:
        self._expire(_now())
        return self._changes.generation()

    def changed_since(self, generation: int) -> set[str] | None:
        return self._changes.since(generation)

    def size(self) -> int:
        return len(self._pods)

    def pending(self) -> int:
        return len(self._pending)

    def ready(self) -> bool:
        return True  # a source that fills the index says otherwise until its first list

    def assigned(self, key: str) -> bool:
        """Whether the pod `key` (`pod_key`) is known bound: the watch showed it on a node."""
        return key in self._pods

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def _touch(self, node: str | None) -> None:
        """`node`'s pods changed (None: any node's may have); the lock is held."""
        if node is None:
            self._epoch += 1
            self._versions.clear()
        else:
            if len(self._versions) >= _MAX_VERSIONS:
                self._epoch += 1
                self._versions.clear()
                node = None
            else:
                self._versions[node] = self._versions.get(node, 0) + 1
        self._changes.record(node)

    # -- placements by this extender --------------------------------------------------------------------

    def reserve(self, pod: Mapping[str, Any], node: str) -> None:
        key = pod_key(pod)
        if not key or not node:
            return
        now = _now()
        with self._lock:
            if key in self._pods:
                return  # already seen bound: the watch has the last word
            old = self._unpend(key)
            ranked = self._ranked.pop(key, None)
            # A binding names the pod only: it keeps the view (and requests) its ranking recorded.
            view: Mapping[str, Any]
            if isinstance(pod.get("spec"), Mapping):
                view = pod_view(pod)
            else:
                view = old.view if old is not None else ranked or pod_view(pod)
            whole = isinstance(pod.get("spec"), Mapping)
            self._pending[key] = placed = Placed(node, view, now, self._estimate(pod if whole else view, view))
            self._pending_by_node.setdefault(node, {})[key] = placed
            while len(self._pending) > self.max_pending:
                self._unpend(next(iter(self._pending)))
            self._push(now, node)
            self._touch(node)

    def ranked(self, pod: Mapping[str, Any]) -> None:
        key = pod_key(pod)
        if not key:
            return
        view = pod_view(pod)
        with self._lock:
            self._ranked.pop(key, None)
            self._ranked[key] = view
            while len(self._ranked) > self.max_pending:
                self._ranked.popitem(last=False)

    def forget(self, pod: Mapping[str, Any]) -> None:
        key = pod_key(pod)
        if not key or key not in self._pending:
            return
        with self._lock:
            self._unpend(key)

    def _unpend(self, key: str) -> Placed | None:
        """Drop the pending placement `key` (the lock is held)."""
        old = self._pending.pop(key, None)
        if old is not None:
            on_node = self._pending_by_node.get(old.node, {})
            on_node.pop(key, None)
            if not on_node:
                self._pending_by_node.pop(old.node, None)
            self._touch(old.node)
        return old

    # -- what the sources feed --------------------------------------------------------------------------

    def replace(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """All the pods at once (a file, or a list that starts or restarts a watch): one swap."""
        now = _now()
        known = self._pods
        found: dict[str, Placed] = {}
        for pod in pods:
            node, key = assigned_node(pod), pod_key(pod)
            if node and key and len(found) < self.max_pods:
                old = known.get(key)
                when = old.placed if old is not None and old.node == node else placed_at(pod, now)
                view = pod_view(pod)
                found[key] = Placed(node, view, when, self._estimate(pod, view))
        by_node: dict[str, dict[str, Placed]] = {}
        for key, placed in found.items():
            by_node.setdefault(placed.node, {})[key] = placed
        with self._lock:
            self._pods, self._by_node = found, by_node
            for key in [k for k in self._pending if k in found]:
                self._unpend(key)
            if len(found) >= self.max_pods:
                self._overflow()
            for placed in found.values():
                self._push(placed.placed, placed.node)
            self._touch(None)

    def apply(self, kind: str, pod: Mapping[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED) of a pod."""
        key = pod_key(pod)
        if not key:
            return
        node = assigned_node(pod) if kind != "DELETED" else ""
        with self._lock:
            old = self._pods.get(key)
            if node or kind == "DELETED":
                self._unpend(key)  # the watch shows where the pod really went
            if not node:
                if old is not None:
                    self._remove(key, old)
                return
            view = pod_view(pod)
            if old is not None and old.node == node and old.view == view:
                return  # a status change: nothing rules see
            if old is not None:
                self._remove(key, old)
            if len(self._pods) >= self.max_pods:
                self._overflow()
                return
            when = old.placed if old is not None and old.node == node else placed_at(pod, _now())
            placed = Placed(node, view, when, self._estimate(pod, view))
            self._pods[key] = placed
            self._by_node.setdefault(node, {})[key] = placed
            self._push(placed.placed, node)
            self._touch(node)

    def _overflow(self) -> None:
        if not self.overflowed:
            log.warning("pod cache full (%d pods, RULESCHED_MAX_PODS): further pods are left out", self.max_pods)
        self.overflowed = True

    def _remove(self, key: str, old: Placed) -> None:
        del self._pods[key]
        on_node = self._by_node.get(old.node, {})
        on_node.pop(key, None)
        if not on_node:
            self._by_node.pop(old.node, None)
        self._touch(old.node)

    def _push(self, placed: datetime.datetime, node: str) -> None:
        expires = placed + datetime.timedelta(seconds=self.recent_seconds)
        if expires > _now() and len(self._expiries) < self.max_pods + self.max_pending:
            heapq.heappush(self._expiries, (expires, node))

    def _expire(self, now: datetime.datetime) -> None:
        """Nodes whose `recent` shrinks by itself as time passes are recorded as changed; pending
        placements older than `recent_seconds` are dropped."""
        if not self._expiries or self._expiries[0][0] > now:
            return
        with self._lock:
            while self._expiries and self._expiries[0][0] <= now:
                _, node = heapq.heappop(self._expiries)
                self._touch(node)
            limit = now - datetime.timedelta(seconds=self.recent_seconds)
            for key in [k for k, p in self._pending.items() if p.placed <= limit]:
                self._unpend(key)


class FilePodSource(PodIndex):
    """Pods from a PodList file (`--pods`): the offline pod source, a fixed snapshot. Placements are not
    counted: nothing would ever confirm them, and the same request must get the same answer."""

    def __init__(self, path: Path, *, recent_seconds: float = 30.0, max_pods: int = 200_000) -> None:
        super().__init__(recent_seconds=recent_seconds, max_pods=max_pods)
        self.path = path
        self.replace(items_of(path, "PodList"))

    def reserve(self, pod: Mapping[str, Any], node: str) -> None:
        pass

    def ranked(self, pod: Mapping[str, Any]) -> None:
        pass
