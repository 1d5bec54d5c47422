"""The reload canary (`--reload-canary`): a new rule book tried before it replaces the active one.

The pods of the latest filter calls are kept (`RecentPods`, one per pod, `--reload-canary-pods` at most).
When a reload has loaded a book that differs, the rule store asks `ReloadCanary` (a vetter of the store) in
the reload's own thread, off the event loop: each kept pod (the stand-in pod when none is kept yet) is
evaluated with the new book over the current nodes (every node of the node source, in fresh node contexts:
the live ones belong to the event loop; without a node source, the candidates of the pod's own call), for at
most `--reload-canary-seconds`. A rule the canary names (`decide.canary`) refuses the book under `enforce`,
as a book that does not load is refused; under `warn` it is logged and the book is used.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.cluster import Cluster
from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.sources import node_names
from rulesched.decide.canary import Verdict, canary, trials
from rulesched.decide.verbs import Call
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.errors import LoadError
from rulesched.rules.pod_values import namespace_name, pod_identity
from rulesched.settings import Settings

log = logging.getLogger("rulesched.rules")


class RecentPods:
    """The pods of the latest filter calls, one per pod (its latest call), at most `size`; with the call's node
    contexts when `keep_nodes` (no node source to list the nodes from). Written on the event loop, read by the
    reload's thread."""

    def __init__(self, size: int, *, keep_nodes: bool) -> None:
        self.size = size
        self.keep_nodes = keep_nodes
        self._pods: OrderedDict[tuple[str, str], tuple[Mapping[str, Any], Sequence[NodeContext]]] = OrderedDict()
        self._lock = threading.Lock()

    def seen(self, pod: Mapping[str, Any], nodes: Sequence[NodeContext]) -> None:
        identity = pod_identity(pod)
        key = identity["namespace"], identity["name"]
        with self._lock:
            self._pods.pop(key, None)
            self._pods[key] = pod, (nodes if self.keep_nodes else ())
            if len(self._pods) > self.size:
                self._pods.popitem(last=False)

    def latest(self) -> list[tuple[Mapping[str, Any], Sequence[NodeContext]]]:
        with self._lock:
            return list(self._pods.values())


class ReloadCanary:
    """The store's vetter under `--reload-canary enforce` or `warn`: the errors that refuse a book."""

    def __init__(self, settings: Settings, cluster: Cluster, recent: RecentPods) -> None:
        self.settings = settings
        self.cluster = cluster
        self.recent = recent

    def __call__(self, book: RuleBook) -> Sequence[LoadError]:
        started = time.monotonic()
        verdict = canary(book, self.calls(), started + self.settings.reload_canary_seconds)
        seconds = time.monotonic() - started
        log.info(
            "reload canary: %d call(s) tried in %.3f s, %d rule(s) named", verdict.tried, seconds, len(verdict.findings)
        )
        return self._judged(verdict)

    def calls(self) -> list[Call]:
        """Each kept pod (or the stand-in) over the current nodes, or its own call's when there is no node source."""
        everywhere = self._current_nodes()
        latest = self.recent.latest()
        if not latest:
            return trials([], everywhere, self._namespace)
        found: list[Call] = []
        for pod, nodes in latest:
            found += trials([pod], everywhere or nodes, self._namespace)
        return found

    def _current_nodes(self) -> list[NodeContext]:
        cluster = self.cluster
        if cluster.nodes is None:
            return []
        contexts = NodeContexts(cluster.nodes, cluster.metrics, cluster.pods, cluster.custom)
        return contexts.for_names(node_names(cluster.nodes))[0]

    def _namespace(self, pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
        source = self.cluster.namespaces
        return source.get(namespace_name(pod)) if source is not None else None

    def _judged(self, verdict: Verdict) -> Sequence[LoadError]:
        errors = [finding.error() for finding in verdict.findings]
        if errors and self.settings.reload_canary == "warn":
            log.warning("reload canary (warn): the new rules are used anyway: %s", "; ".join(map(str, errors)))
            return ()
        return errors
