"""`--requeue`: pods this replica rejected are evaluated again when an input changes, and kube-scheduler is
nudged to retry one the moment a rule would let it through (docs/operations/requeue.md).

After a filter answer with no passing node, the pod and its candidates' names are remembered
(`memory.RejectedPods`); a later filter call for the pod forgets it. A task on the event loop looks
at the sources every `TICK` seconds: the rules' generation, the metrics poll, the node, pod and Prometheus
values' change logs. Each change is marked on the remembered pods (a node or pod change: only the
candidates it concerns), and each step evaluates at most `--requeue-batch` marked pods through the
routes' own evaluation (`Passing`, given by the server: the one call into the engine). A pod that now passes
somewhere is handed to the nudge thread (`nudger.Nudger`), which patches its annotation within the rate
limit (`writes/nudge.py`); its outcome is counted, logged on the decision log, and a 404 or 409 forgets the
pod. Nothing here runs on a request's path: the filter route only hands the pod on, after its answer is sent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from rulesched.cluster import Cluster
from rulesched.cluster.pods.index import PodIndex, pod_key
from rulesched.controllers.requeue.memory import Change, Rejected, RejectedPods, TokenBucket, rejected_key
from rulesched.controllers.requeue.metrics import RequeueMetrics
from rulesched.controllers.requeue.nudger import Nudger
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.pod_values import pod_identity
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings
from rulesched.writes.nudge import Nudge, NudgeOutcome, change_id

log = logging.getLogger(__name__)
decision_log = logging.getLogger("rulesched.decision")

TICK = 0.05
"""Seconds between two looks at the sources (a few microseconds each when nothing changed)."""


Passing = Callable[[RuleBook, Mapping[str, Any], Sequence[str]], Awaitable[list[NodeContext]]]
"""The candidates among the names on which the pod passes the filters now, evaluated as /filter evaluates
(the server's own evaluation, so that a change of the engine changes one place)."""


class Requeue:
    """The remembered pods, the task that evaluates them again, and the nudge thread; `run()` as a task."""

    def __init__(
        self,
        store: RuleStore,
        cluster: Cluster,
        passing: Passing,
        settings: Settings,
        registry: CollectorRegistry,
        api: Any,
    ) -> None:
        self.store, self.cluster, self.passing = store, cluster, passing
        self.batch = settings.requeue_batch
        self.pods = RejectedPods(settings.requeue_max_pods, settings.requeue_ttl)
        self.metrics = RequeueMetrics(registry, lambda: float(self.pods.size()))
        bucket = TokenBucket(settings.requeue_rate, settings.requeue_burst)
        self.nudger = Nudger(api, bucket, self, kept=settings.requeue_max_pods)
        self.stopped = False
        self._seen: dict[str, Hashable] = self._generations()

    # -- the filter route's hand-over (after the answer) ------------------------------------------------

    def after_filter(self, pod: Mapping[str, Any], names: Sequence[str], passed: bool) -> Callable[[], None]:
        """What the filter call does once answered: remember the pod when nothing passed, else forget it."""
        return functools.partial(self._answered, pod, tuple(names), passed)

    def _answered(self, pod: Mapping[str, Any], names: tuple[str, ...], passed: bool) -> None:
        if passed or not names:
            self.pods.forget(rejected_key(pod))
        else:
            self.pods.remember(pod, names)

    # -- the task ---------------------------------------------------------------------------------------

    def start(self) -> None:
        self.nudger.start()

    def stop(self) -> None:
        self.stopped = True
        self.nudger.stop()

    async def run(self) -> None:
        """Look for changes and evaluate the marked pods until `stop()`; an error is logged, never raised."""
        while not self.stopped:
            await asyncio.sleep(TICK)
            try:
                await self.step()
            except Exception:
                log.exception("requeue: evaluating the remembered pods failed; trying again at the next change")

    async def step(self) -> int:
        """Mark the changes on the remembered pods, evaluate a batch of them; how many were evaluated."""
        self.pods.expire()
        changes = self._changes()
        if any(change.kind == "pods" for change in changes):
            self._forget_bound()
        for change in changes:
            self.pods.mark(change)
        book = self.store.book
        if book is None or not self.pods.size():
            return 0
        taken = self.pods.take(self.batch)
        for rejected in taken:
            await self._evaluate(book, rejected)
        return len(taken)

    async def _evaluate(self, book: RuleBook, rejected: Rejected) -> None:
        names = rejected.candidates()
        if not names or rejected.change is None:
            return
        found = await self.passing(book, rejected.pod, names)
        self.metrics.reevaluations.inc()
        if not found or not self.pods.nudged(rejected.key):
            return
        context, identity = found[0], pod_identity(rejected.pod)
        metadata = context.node.get("metadata") or {}
        usage = [context.metrics.get(r, {}).get("usage") for r in ("cpu", "memory")]
        value = change_id(rejected.change.kind, (book.hash, context.name, metadata.get("resourceVersion"), *usage))
        self.nudger.submit(
            Nudge(rejected.key, identity["namespace"], identity["name"], identity["uid"], value,
                  rejected.change.kind, rejected.change.at, context.name)
        )  # fmt: skip

    def _generations(self) -> dict[str, Hashable]:
        cluster, book = self.cluster, self.store.book
        sources = {"nodes": cluster.nodes, "pods": cluster.pods, "prometheus": cluster.custom}
        found: dict[str, Hashable] = {"rules": book.generation if book else 0}
        found["metrics"] = cluster.metrics.generation() if cluster.metrics else 0
        found |= {kind: source.generation() for kind, source in sources.items() if source is not None}
        return found

    def _changes(self) -> list[Change]:
        """What changed since the last look: the rules first (every candidate), then the sources."""
        now, seen = time.monotonic(), self._seen
        current = self._generations()
        if current == seen:
            return []
        self._seen = current
        cluster = self.cluster
        changes = []
        for kind, generation in current.items():
            if seen.get(kind) == generation:
                continue
            nodes: frozenset[str] | None = None
            source = {"nodes": cluster.nodes, "pods": cluster.pods}.get(kind)
            if source is not None and isinstance(before := seen.get(kind), int):
                changed = source.changed_since(before)
                nodes = None if changed is None else frozenset(changed)
            changes.append(Change(kind, now, nodes))
        return changes

    def _forget_bound(self) -> None:
        """Forget the remembered pods the pod watch shows bound (anywhere)."""
        source = self.cluster.pods
        index = source if isinstance(source, PodIndex) else getattr(source, "index", None)
        if not isinstance(index, PodIndex):
            return
        for key, pod in self.pods.remembered():
            if index.assigned(pod_key(pod)):
                self.pods.forget(key)

    # -- outcomes (in the nudge thread) -----------------------------------------------------------------

    def wanted(self, key: str) -> bool:
        """A queued nudge is sent only while its pod is remembered (not asked about again, bound, expired)."""
        return self.pods.holds(key)

    def report(self, nudge: Nudge, outcome: NudgeOutcome, reason: str) -> None:
        self.metrics.nudges.labels(outcome).inc()
        delay = time.monotonic() - nudge.changed
        if outcome == "patched":
            self.metrics.delay.observe(delay)
        elif outcome in ("gone", "conflict", "dropped"):
            self.pods.forget(nudge.key)  # deleted, another pod now has the name, or nothing left to retry
        else:
            self.pods.retry(nudge.key)  # not applied: the next change may nudge again
        fields = {
            "pod": {"namespace": nudge.namespace, "name": nudge.name, "uid": nudge.uid},
            "verb": "requeue",
            "node": nudge.node,
            "change": nudge.kind,
            "value": nudge.value,
            "outcome": outcome,
            "delaySeconds": round(delay, 3),
        }
        if reason:
            fields["reason"] = reason
        decision_log.info(
            "requeue %s/%s: passes on %s after a %s change; nudge %s",
            nudge.namespace, nudge.name, nudge.node, nudge.kind, outcome, extra=fields,
        )  # fmt: skip

    def status(self) -> dict[str, Any]:
        """What /rules shows: the set's size and bound, and the nudges waiting for the rate limit."""
        return {"rememberedPods": self.pods.size(), "maxPods": self.pods.kept, "queuedNudges": self.nudger.queued()}
