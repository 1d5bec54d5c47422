"""`--requeue`: pods this replica rejected are evaluated again when an input changes, and kube-scheduler is
nudged to retry one the moment a rule would let it through (docs/operations/requeue.md).

After a filter answer with no passing node, the pod and its candidates' names are remembered
(`cluster.requeue.RejectedPods`); a later filter call for the pod forgets it. A task on the event loop looks
at the sources every `TICK` seconds: the rules' generation, the metrics poll, the node, pod and Prometheus
values' change logs. Each change is marked on the remembered pods (a node or pod change: only the
candidates it concerns), and each step evaluates at most `--requeue-batch` marked pods through the
routes' own evaluation (`passing`: the one call into the engine). A pod that now passes somewhere is handed
to the nudge thread (`cluster.nudge`), which patches its annotation within the rate limit; its outcome is
counted, logged on the decision log, and a 404 or 409 forgets the pod. Nothing here runs on a request's
path: the filter route only hands the pod on, after its answer is sent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, get_args

from prometheus_client import Counter, Gauge, Histogram

from rulesched.cluster.nudge import Nudge, NudgeOutcome, Nudger
from rulesched.cluster.pods import PodIndex, pod_key
from rulesched.cluster.requeue import Change, Rejected, RejectedPods, TokenBucket, change_id, rejected_key
from rulesched.decide.verbs import Call, Verb
from rulesched.extender.metrics import Metrics
from rulesched.extender.state import Extender
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.pod_values import pod_identity
from rulesched.settings import Settings

log = logging.getLogger(__name__)
decision_log = logging.getLogger("rulesched.decision")

TICK = 0.05
"""Seconds between two looks at the sources (a few microseconds each when nothing changed)."""
DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


async def passing(
    extender: Extender, book: RuleBook, pod: Mapping[str, Any], names: Sequence[str]
) -> list[NodeContext]:
    """The candidates among `names` on which `pod` passes the filters now: the routes' own evaluation
    (`Extender.evaluate`, as /filter calls it), so that a change of the engine changes this one place."""
    contexts, unknown = await extender.in_evaluator(len(names), lambda: extender.contexts.for_names(names))
    if not contexts:
        return []
    deadline, namespace = extender.deadline(), extender.namespace(pod)
    call = Call(pod, contexts, Verb.FILTER, None, deadline, namespace, True, None if unknown else names)
    decision = await extender.evaluate(book, call)
    passed = set(decision.outcome()[0])
    return [context for context in contexts if context.name in passed]


class RequeueMetrics:
    """The four requeue metrics, in the app's registry (a Grafana dashboard reads these names)."""

    def __init__(self, metrics: Metrics, remembered: Callable[[], float]) -> None:
        r = metrics.registry
        self.remembered = Gauge("rulesched_requeue_remembered_pods", "Rejected pods remembered for requeue", registry=r)
        self.remembered.set_function(remembered)
        self.reevaluations = Counter(
            "rulesched_requeue_reevaluations", "Remembered pods evaluated again after a change", registry=r
        )
        self.nudges = Counter(
            "rulesched_requeue_nudges",
            "Nudges (annotation patches) by outcome: patched, forbidden, gone, conflict, raced, throttled, failed,"
            " dropped",
            ["outcome"],
            registry=r,
        )
        for outcome in get_args(NudgeOutcome):  # every outcome from the start: rates and alerts see a 0, not nothing
            self.nudges.labels(outcome)
        self.delay = Histogram(
            "rulesched_requeue_nudge_delay_seconds",
            "Seconds from the change that let a pod through to its accepted nudge",
            buckets=DELAY_BUCKETS,
            registry=r,
        )


class Requeue:
    """The remembered pods, the task that evaluates them again, and the nudge thread; `run()` as a task."""

    def __init__(self, extender: Extender, settings: Settings, metrics: Metrics, api: Any) -> None:
        self.extender = extender
        self.batch = settings.requeue_batch
        self.pods = RejectedPods(settings.requeue_max_pods, settings.requeue_ttl)
        self.metrics = RequeueMetrics(metrics, lambda: float(self.pods.size()))
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
        book = self.extender.store.book
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
        found = await passing(self.extender, book, rejected.pod, names)
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
        cluster, book = self.extender.cluster, self.extender.store.book
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
        cluster = self.extender.cluster
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
        source = self.extender.cluster.pods
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
