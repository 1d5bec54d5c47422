"""The state the verbs share (`Extender`): settings, the rule store, the cluster sources, the evaluation thread,
and the steps every verb takes with them (read the candidates, evaluate a call on the loop or in the thread).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from rulesched.cluster import Cluster
from rulesched.cluster.contexts import NodeContexts
from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.fast.budget import NeedsEvaluationError, within
from rulesched.decide.verbs import Call
from rulesched.extender import wire, wire_full
from rulesched.extender.answered import Answered, Idle
from rulesched.extender.body import read_body
from rulesched.extender.canary import RecentPods
from rulesched.extender.connection import BODY_ARRIVED
from rulesched.extender.observe import Observer
from rulesched.extender.recording import Recorder
from rulesched.extender.shadow import Shadow
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext, with_pods
from rulesched.rules.pod_values import namespace_name
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings

_SEEN_NODES = 10_000

T = TypeVar("T")

Found = tuple[Sequence[NodeContext], Mapping[str, str], Decision]
"""A call's node contexts, the names it could not evaluate (with why), and its decision."""


class AfterFilter(Protocol):
    """`--requeue` (`controllers.requeue.controller.Requeue`), told of each filter answer whether any node passed
    (a protocol: the controller never imports the extender)."""

    def after_filter(self, pod: Mapping[str, Any], names: Sequence[str], passed: bool) -> Callable[[], None]:
        """The step to run once the answer is sent."""

    def status(self) -> dict[str, Any]:
        """What /rules says of it."""


class Extender:
    """The state the verbs share: settings, the rule store, the cluster sources, the observer."""

    def __init__(self, settings: Settings, store: RuleStore, cluster: Cluster, observer: Observer) -> None:
        self.settings = settings
        self.store = store
        self.cluster = cluster
        self.observer = observer
        self.contexts = NodeContexts(cluster.nodes, cluster.metrics, cluster.pods, cluster.custom)
        # Full mode sends whole nodes with filter, but only names with preempt: the contexts keep the
        # nodes that have a resourceVersion, this the few that have none.
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

    def body(self, request: Request) -> Coroutine[object, object, bytes]:
        """The whole body, at most `--max-body-bytes`, arrived within `--body-timeout` (`read_body`'s coroutine,
        awaited by the verb: no frame of its own)."""
        settings = self.settings
        arrived = bool(request.scope.get(BODY_ARRIVED))
        return read_body(request, settings.max_body_bytes, settings.body_timeout, arrived)

    def args(self, body: bytes) -> wire.ExtenderArgs:
        return wire.ExtenderArgs.parse(body, self.settings.max_candidates, self.texts)

    def book(self) -> RuleBook:
        book = self.store.book
        if book is None:  # the server does not start without rules; kept for type safety
            raise RuntimeError("no rules loaded")
        return book

    async def candidates(
        self, args: wire.ExtenderArgs, replaced: list[object] | None = None
    ) -> tuple[list[NodeContext], dict[str, str]]:
        """The nodes to evaluate, and the names that cannot be evaluated with why. Full mode's nodes are
        remembered for preempt; the ones they replace go to `replaced`, to be freed after the answer."""
        nodes, names = args.nodes, args.node_names or []
        if nodes is not None:
            self._remember(nodes, replaced if replaced is not None else [])
            return await self.in_evaluator(len(nodes), lambda: self.contexts.for_objects(nodes)), {}
        known, unknown = await self.in_evaluator(len(names), lambda: self.contexts.for_names(names))
        if not unknown:
            return known, {}
        return await self._fetch_missing(args.node_names or [], known, unknown)

    async def _fetch_missing(
        self, order: Sequence[str], known: list[NodeContext], unknown: list[str]
    ) -> tuple[list[NodeContext], dict[str, str]]:
        source = self.cluster.nodes
        if source is None:
            reason = "rulesched has no node source: register it with nodeCacheCapable: false, or give it --nodes"
            return known, dict.fromkeys(unknown, reason)
        timeout = self.settings.node_fetch_timeout
        asked = unknown[: self.settings.max_node_fetches]
        fetched = await asyncio.gather(*(self._fetch(name, timeout) for name in asked))
        found = {name: node for name, node in zip(asked, fetched, strict=True) if node is not None}
        missing = {
            name: "node not found by rulesched (not in its node cache nor in the API)"
            for name in asked
            if name not in found
        }
        if len(unknown) > len(asked):
            reason = f"node not in rulesched's node cache (not looked up: more than {len(asked)} unknown names)"
            missing.update(dict.fromkeys(unknown[len(asked) :], reason))
        by_name = {c.name: c for c in known} | {n: self.contexts.context(node) for n, node in found.items()}
        return [by_name[n] for n in order if n in by_name], missing

    async def _fetch(self, name: str, timeout: float) -> Mapping[str, Any] | None:
        source = self.cluster.nodes
        assert source is not None
        try:
            return await asyncio.wait_for(run_in_threadpool(source.fetch, name), timeout + 1)
        except TimeoutError:
            return None

    def _remember(self, nodes: Sequence[Mapping[str, Any]], replaced: list[object]) -> None:
        """Keep the nodes preempt may need that the contexts do not: those without a resourceVersion
        (the contexts keep every other node's latest version)."""
        seen = self.seen
        for node in nodes:
            if node["metadata"].get("resourceVersion"):
                continue
            name = node["metadata"]["name"]
            old = seen.pop(name, None)
            if old is not None:
                replaced.append(old)
            seen[name] = node
        while len(seen) > _SEEN_NODES:
            replaced.append(seen.popitem(last=False)[1])

    def preempt_contexts(self, victims: Mapping[str, wire.Victims]) -> list[NodeContext]:
        """Each candidate node's context as it would be with its victims gone (from `pods`, `allocated`
        and `recent`), so that rules see the node preemption would leave."""
        contexts = []
        for name, chosen in victims.items():
            node = (self.cluster.nodes.get(name) if self.cluster.nodes else None) or self.seen.get(name)
            if node is None:
                node = self.contexts.last_seen(name)  # full mode: the latest version filter was sent
            if node is not None:
                context = self.contexts.context(node)
                if chosen.uids:
                    context = with_pods(context, context.pods.without(set(chosen.uids)))
                contexts.append(context)
        return contexts

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

    def _estimate_handed_on(self, pod: Mapping[str, Any]) -> Mapping[str, float] | None:
        """The pod's `estimate` for what the call is handed on to, when that needs it (the live rules read none):
        the recording keeps every input of the call; the shadow book only when its rules read it. Else None:
        finding it costs tens of microseconds, after each answer, before the next call is read."""
        if self.recorder is not None:
            return self.estimate(pod)
        shadow_book = self.shadow.store.book if self.shadow is not None else None
        return self.estimate_for(shadow_book, pod) if shadow_book is not None else None

    def handing_on(self) -> bool:
        """Whether answered calls go anywhere after their answer (a shadow book, a recording)."""
        return self.shadow is not None or self.recorder is not None

    def hand_on(self, answered: Answered) -> None:
        """After the answer was sent: queue the call for the shadow book and the recording (both bounded)."""
        if self.shadow is not None:
            self.shadow.submit(answered)
        if self.recorder is not None:
            self.recorder.submit(answered)

    def answered(
        self,
        verb: str,
        args: wire.ExtenderArgs,
        call: tuple[datetime.datetime, RuleBook],
        found: Found,
        estimate: Mapping[str, float] | None = None,
    ) -> Callable[[], None] | None:
        """What to run once the answer is sent (None: nothing); `call`: the time the rules saw and the book;
        `estimate`: the pod's the rules saw (None: they read none, and it is found once the answer is sent)."""
        if not self.handing_on():
            return None
        now, book = call
        contexts, unknown, decision = found
        full, pod, namespace = args.nodes is not None, args.pod, self.namespace(args.pod)

        def hand_on() -> None:
            seen = estimate if estimate is not None else self._estimate_handed_on(pod)
            self.hand_on(Answered(verb, full, pod, contexts, unknown, namespace, now, book, decision, seen))

        return hand_on

    def forget(self, pod: Mapping[str, Any]) -> None:
        """The pod is being scheduled (again): a placement this extender made for it earlier is void."""
        if self.cluster.pods is not None:
            self.cluster.pods.forget(pod)

    def reserve(self, pod: Mapping[str, Any], decision: Decision) -> None:
        """Count the pod on the node this extender ranked first of the `decision`'s candidates, when one node
        alone has the top score (with ties, kube-scheduler's own scores decide: the pod is counted when /bind
        names its node), until the pod watch shows where it went."""
        if self.cluster.pods is None:
            return
        scores = decision.scores()
        if not scores:
            return
        # Every prioritize call pays for this over all its candidates: C-level passes only (a loop in
        # Python cost as much as the rest of a 1000-candidate call's own Python work).
        best = max(scores)
        if scores.count(best) == 1:
            self.cluster.pods.reserve(pod, decision.names[scores.index(best)])
        else:
            self.cluster.pods.ranked(pod)
