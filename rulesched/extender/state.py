"""The state the verbs share (`Extender`): settings, the rule store, the cluster sources and the caches around
them, the evaluation thread, and the targets an answered call is handed on to. It offers them (the current
book, a pod's namespace and estimate, a call evaluated in the evaluation thread) and takes no step of a request:
each verb's steps are in `routes.py`, in order (read, parse, gather, decide, answer, hand on).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from rulesched.cluster import Cluster
from rulesched.cluster.contexts import NodeContexts
from rulesched.controllers.shadow import Shadow
from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.fast.budget import NeedsEvaluationError, within
from rulesched.decide.verbs import Call
from rulesched.extender import wire_full
from rulesched.extender.canary import RecentPods
from rulesched.extender.observe import Observer
from rulesched.extender.recording import Recorder
from rulesched.handoff.idle import Idle
from rulesched.rules.book import RuleBook
from rulesched.rules.pod_values import namespace_name
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings

T = TypeVar("T")


class AfterFilter(Protocol):
    """`--requeue` (`controllers.requeue.controller.Requeue`), told of each filter answer whether any node passed
    (a protocol: the controller never imports the extender)."""

    def after_filter(self, pod: Mapping[str, Any], names: Sequence[str], passed: bool) -> Callable[[], None]:
        """The step to run once the answer is sent."""

    def status(self) -> dict[str, Any]:
        """What /rules says of it."""


class Extender:
    """The state the verbs share: settings, the rule store, the cluster sources and caches, the evaluation thread,
    the observer and the hand-on targets (shadow book, recorder, requeue, reload canary)."""

    def __init__(self, settings: Settings, store: RuleStore, cluster: Cluster, observer: Observer) -> None:
        self.settings = settings
        self.store = store
        self.cluster = cluster
        self.observer = observer
        self.contexts = NodeContexts(cluster.nodes, cluster.metrics, cluster.pods, cluster.custom)
        # Full mode sends whole nodes with filter, but only names with preempt: the contexts keep the
        # nodes that have a resourceVersion, this the few that have none (`gather.SEEN_NODES` at most).
        self.seen: OrderedDict[str, Mapping[str, Any]] = OrderedDict()
        self.texts = wire_full.NodeTexts()
        """Full mode: the nodes decoded for earlier requests, with the texts they were sent as."""
        self.evaluator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rulesched-evaluate")
        """The one thread rules are evaluated in."""
        self.evaluating = 0
        """Calls handed to the evaluation thread and not yet answered (changed on the event loop only)."""
        self.idle = Idle()
        """Whether a request is being read or answered (told by the connections): the shadow comparisons and the
        recording wait for the moments when none is."""
        self.shadow: Shadow | None = None
        self.recorder: Recorder | None = None
        self.requeue: AfterFilter | None = None
        """`--requeue`: told of every filter answer (after it is sent) whether the pod may be retried later."""
        self.recent: RecentPods | None = None
        """`--reload-canary`: the pods of recent filter calls, which a new rule book is tried on."""
        self.last_prioritize: tuple[Mapping[str, Any], list[str]] | None = None
        """The last names-mode prioritize call's pod and candidates, which `--refresh-ahead` evaluates again."""

    def deadline(self) -> float:
        """The deadline of a request that starts now, as a `time.monotonic()` value."""
        return time.monotonic() + self.settings.request_deadline

    async def evaluate(self, book: RuleBook, call: Call) -> Decision:
        """`engine.evaluate` of the call, cut short at its deadline. A call the caches answer (a replica, say), or
        that needs little evaluation (`--loop-work`, from the rules' estimated costs: a new pod over cheap rules),
        is answered here; any other runs in the evaluation thread. Evaluations never overlap: the caches are not
        shared between threads. A call without an `estimate` is given the pod's from the usage store when the
        book's rules read it (`estimate_for`)."""
        plan = prepared(book)
        if call.estimate is None and plan.reads_estimate:
            call = call._replace(estimate=self.estimate(call.pod))
        work = functools.partial(evaluate, plan, call)
        if not self.evaluating:
            try:
                with within(self.settings.loop_work):
                    return work()
            except NeedsEvaluationError:
                pass
        self.evaluating += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.evaluator, work)
        finally:
            self.evaluating -= 1

    async def in_evaluator(self, size: int, work: Callable[[], T]) -> T:
        """`work()` (building a request's node contexts, say): in the evaluation thread when the request has
        more than `--thread-candidates` candidates, so that the event loop keeps answering meanwhile, and
        never beside an evaluation; on the loop otherwise."""
        if size <= self.settings.thread_candidates:
            return work()
        self.evaluating += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.evaluator, work)
        finally:
            self.evaluating -= 1

    def book(self) -> RuleBook:
        book = self.store.book
        if book is None:  # the server does not start without rules; kept for type safety
            raise RuntimeError("no rules loaded")
        return book

    def namespace(self, pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The pod's Namespace as the namespace source knows it (None when unknown)."""
        source = self.cluster.namespaces
        return source.get(namespace_name(pod)) if source is not None else None

    def estimate(self, pod: Mapping[str, Any]) -> Mapping[str, float] | None:
        """The pod's `estimate` from the usage store (None without one: the rules see its requests)."""
        estimates = self.cluster.estimates
        return estimates.store.estimate(pod) if estimates is not None else None

    def estimate_for(self, book: RuleBook, pod: Mapping[str, Any]) -> Mapping[str, float] | None:
        """The pod's `estimate` when `book`'s rules read it, else None: no rule sees it then, and finding it (the
        pod's workload looked up, or its requests parsed for the fallback) would cost every call."""
        return self.estimate(pod) if prepared(book).reads_estimate else None

    def handing_on(self) -> bool:
        """Whether answered calls go anywhere after their answer (a shadow book, a recording)."""
        return self.shadow is not None or self.recorder is not None
