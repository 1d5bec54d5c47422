"""The continuous audit in the server: running pods audited again when the rules, a node, its metrics or its
pods change, a few nodes at a time, in a background loop of its own (`cluster/loop.py`).

Each step looks at the sources' generations, marks the nodes that may have changed (a new rule book, a
metrics poll or a custom metrics poll: every node with pods; a node or pod event: that node), then audits
at most `--audit-nodes-per-step` of them and rests `--audit-interval` seconds. Nothing of it runs on the
request path: it has its own node contexts and its own copy of the book's plan (the plan's caches are
never shared between threads), so a request neither waits for it nor finds its caches changed.

A pass is complete when every node marked has been audited; `age()` is the time since the audit was last
complete (the `rulesched_audit_age_seconds` gauge). A pod that starts or stops violating a rule is one
line of the decision log. At most `--audit-max-violations` violations are kept (`overflowed` says so).
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.loop import BackgroundLoop, LoopOptions, Outcome
from rulesched.cluster.metrics.custom import CustomValues
from rulesched.cluster.pods.index import NamespaceSource, PodSource
from rulesched.cluster.pods.placement_view import PlacementViews
from rulesched.cluster.sources import MetricsSource, NodeSource, node_names
from rulesched.controllers.audit.audit import Audited, Violation, audit_node, audited_filters
from rulesched.rules.book import RuleBook
from rulesched.rules.store import RuleStore

log = logging.getLogger("rulesched.decision")


class Deschedules(Protocol):
    """What acts on the audit's violations after each step (`descheduler.Descheduler`: a protocol, as that
    module reads the audit)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def step(self, auditor: Auditor) -> None: ...

    def counts(self) -> dict[tuple[str, str], int]: ...


@dataclass(frozen=True, slots=True)
class AuditPace:
    """How much the audit does and keeps (settings `audit_interval`, `audit_nodes_per_step`, `audit_max_violations`)."""

    interval: float = 0.5
    nodes_per_step: int = 32
    max_violations: int = 10_000


@dataclass(frozen=True, slots=True)
class AuditSources:
    """What the audit reads: the server's own sources, read from the audit's thread (each is thread-safe)."""

    nodes: NodeSource
    pods: PodSource
    metrics: MetricsSource | None = None
    namespaces: NamespaceSource | None = None
    custom: CustomValues | None = None
    placements: PlacementViews | None = None
    """The descheduler's views of the pods, read from the whole objects (`--deschedule`)."""


class Auditor:
    """The continuous audit; `start()` runs it in its own thread, `violations()` reads it from any thread."""

    def __init__(self, store: RuleStore, sources: AuditSources, pace: AuditPace = AuditPace()) -> None:
        self.store = store
        self.sources = sources
        self.pace = pace
        self.contexts = NodeContexts(sources.nodes, sources.metrics, sources.pods, sources.custom)
        self.loop = BackgroundLoop(self.step, LoopOptions("rulesched-audit", interval=pace.interval))
        self.overflowed = False
        self.descheduler: Deschedules | None = None
        """Acts on the violations after each step (`--deschedule`), in this thread."""
        self._lock = threading.Lock()
        self._by_node: dict[str, tuple[Violation, ...]] = {}
        self._round: dict[str, None] = {}
        """The nodes left to audit in the pass under way, in order."""
        self._dirty: dict[str, None] = {}
        """The nodes marked since the pass under way began: the next pass."""
        self._generations: tuple[tuple[Hashable, ...], int, int] | None = None
        self._book: RuleBook | None = None
        self._audited: Audited = frozenset()
        self._complete: float | None = None
        self._step_began = 0.0
        self._round_began: float | None = None
        """When the pass under way was formed: every change seen before then is in it or audited."""

    # -- what readers see --------------------------------------------------------------------------------

    def violations(self) -> list[Violation]:
        """Every violation kept, sorted."""
        with self._lock:
            found = [v for kept in self._by_node.values() for v in kept]
        return sorted(found)

    def age(self) -> float | None:
        """Seconds since the audit was last complete (every change seen audited); None before the first pass."""
        complete = self._complete
        return None if complete is None else max(0.0, time.time() - complete)

    def audited(self) -> Audited:
        """The (rule set, filter) pairs the book last evaluated audits."""
        return self._audited

    def generation(self) -> int:
        """The generation of the rule book the audit last evaluated (0: none yet)."""
        return self._book.generation if self._book is not None else 0

    @property
    def book(self) -> RuleBook | None:
        """The audit's copy of the rule book (its own plan), read from the audit's thread."""
        return self._book

    def start(self) -> None:
        if self.descheduler is not None:
            self.descheduler.start()
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
        if self.descheduler is not None:
            self.descheduler.stop()

    # -- the loop ----------------------------------------------------------------------------------------

    def step(self) -> Outcome:
        """Mark what changed, audit a few nodes, and note a pass complete."""
        book = self.store.book
        if book is None:
            return "ok"
        self._step_began = time.time()
        self._mark(book)
        now = datetime.datetime.now(datetime.UTC)
        for _ in range(self.pace.nodes_per_step):
            if not self._round:
                break
            name = next(iter(self._round))
            del self._round[name]
            self._audit(name, now)
        if not self._round:
            # Every change seen before the pass began is audited: the audit is complete as of then.
            self._complete = self._round_began
            self._new_round()
        if self.descheduler is not None:
            self.descheduler.step(self)
        return "ok"

    def _mark(self, book: RuleBook) -> None:
        """Mark the nodes that may have changed since the last step."""
        sources = self.sources
        everything = (
            book.generation,
            sources.metrics.generation() if sources.metrics is not None else 0,
            sources.custom.generation() if sources.custom is not None else 0,
        )
        nodes, pods = sources.nodes.generation(), sources.pods.generation()
        before, self._generations = self._generations, (everything, nodes, pods)
        if before is None or before[0] != everything:
            if self._book is None or self._book.generation != book.generation:
                # A copy, so that its plan (`prepared(copy)`) is the audit's own: the book's caches belong to the
                # request path's thread.
                self._book = replace(book)
                self._audited = audited_filters(book)
            self._mark_names(None)
            return
        if before[1] != nodes:
            self._mark_names(sources.nodes.changed_since(before[1]))
        if before[2] != pods:
            self._mark_names(sources.pods.changed_since(before[2]))

    def _mark_names(self, names: Iterable[str] | None) -> None:
        if names is None:
            names = [*node_names(self.sources.nodes), *self._by_node]
        for name in names:
            if name not in self._round:
                self._dirty[name] = None
        if not self._round:
            self._new_round()

    def _new_round(self) -> None:
        """The nodes marked so far become the next pass (nothing to do: complete as of this step)."""
        self._round, self._dirty = self._dirty, {}
        self._round_began = self._step_began

    def _audit(self, name: str, now: datetime.datetime) -> None:
        book, node = self._book, self.sources.nodes.get(name)
        found: list[Violation] = []
        # A node without pods has no violation: no context is made for it.
        if book is not None and node is not None and self.sources.pods.node_pods(name, None).pods:
            context = self.contexts.context(node, name)
            found = audit_node(book, context, self._audited, self.sources.namespaces, now)
        with self._lock:
            before = self._by_node.get(name, ())
            kept = sum(len(v) for v in self._by_node.values()) - len(before)
            if kept + len(found) > self.pace.max_violations:
                if not self.overflowed:
                    log.warning("audit: more than %d violations; the rest are not kept", self.pace.max_violations)
                self.overflowed = True
                found = found[: max(0, self.pace.max_violations - kept)]
            if found:
                self._by_node[name] = tuple(found)
            else:
                self._by_node.pop(name, None)
        self._report(before, found)

    def _report(self, before: Iterable[Violation], after: Iterable[Violation]) -> None:
        """Log the pods that start and stop violating a rule."""
        old = {_key(v): v for v in before}
        new = {_key(v): v for v in after}
        started = [v for k, v in new.items() if k not in old]
        stopped = [v for k, v in old.items() if k not in new]
        for violation in started:
            _log("starts violating", violation)
        for violation in stopped:
            _log("stops violating", violation)


def _key(violation: Violation) -> tuple[str, str, str, str, str]:
    return violation.namespace, violation.pod, violation.uid, violation.rule_set, violation.rule


def _log(what: str, v: Violation) -> None:
    mode = "" if v.enforce else " (mode Audit)"
    fields = {"audit": what.split()[0], "violation": v.as_dict()}
    log.info(
        "audit: %s/%s on %s %s %s/%s%s: %s",
        v.namespace,
        v.pod,
        v.node,
        what,
        v.rule_set,
        v.rule,
        mode,
        v.message,
        extra=fields,
    )
