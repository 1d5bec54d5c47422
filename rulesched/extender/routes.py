"""The extender verbs: filter, prioritize, preempt, bind, explain — each a thin layer over the engine.

Every handler reads the active RuleBook once, so a request is answered by one generation of the
rules. Bad input is a 400 with a JSON reason; nothing here lets an exception reach a worker. The
garbage collector pauses while filter and prioritize are answered (see `_NoCollection`).

Rules are evaluated in one worker thread (`Extender.evaluate`), one request at a time, so that the event
loop keeps answering /healthz and /readyz meanwhile; a call the caches answer, or one that needs little
evaluation (`--loop-work`), is answered on the loop, without the trip to the thread. Each request has a
deadline (settings `request_deadline`), past which the rules not yet evaluated follow their failurePolicy.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import gc
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import orjson
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from rulesched.cluster import Cluster
from rulesched.cluster.contexts import NodeContexts
from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.fast.plan import NeedsEvaluationError, within
from rulesched.decide.verbs import Call, Verb
from rulesched.extender import wire
from rulesched.extender.answered import Answered, Idle
from rulesched.extender.connection import BODY_ARRIVED
from rulesched.extender.observe import Observer
from rulesched.extender.recording import Recorder
from rulesched.extender.shadow import Shadow
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext, context_report, namespace_name, with_pods
from rulesched.rules.estimate import estimate_or_fallback
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings

log = logging.getLogger(__name__)

_SEEN_NODES = 10_000
T = TypeVar("T")
Found = tuple[Sequence[NodeContext], Mapping[str, str], Decision]
"""A call's node contexts, the names it could not evaluate (with why), and its decision."""


class JsonResponse(Response):
    """A JSON body already encoded, with the headers Starlette's `Response` would give it (content-length,
    content-type), set directly: every filter and prioritize answer is one."""

    media_type = "application/json"

    def __init__(self, body: bytes, status_code: int = 200) -> None:
        self.status_code, self.body, self.background = status_code, body, None
        self.raw_headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]


def json_response(content: Any, status_code: int = 200) -> Response:
    return JsonResponse(orjson.dumps(content), status_code)


def _encoded(body: bytes) -> Response:
    return JsonResponse(body)


def error_response(status_code: int, message: str) -> Response:
    return json_response({"error": message}, status_code)


class BodyTooLargeError(Exception):
    pass


class BodyTimeoutError(Exception):
    """The request body did not arrive within `--body-timeout` (a client that stopped sending)."""


class AfterFilter(Protocol):
    """`--requeue` (`extender.requeue.Requeue`), told of each filter answer whether any node passed (a protocol:
    that module imports this one)."""

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
        self.texts = wire.NodeTexts()
        """Full mode: the nodes decoded for earlier requests, with the texts they were sent as."""
        self.evaluator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rulesched-evaluate")
        """The one thread rules are evaluated in."""
        self.evaluating = 0
        """Calls handed to the evaluation thread and not yet answered (changed on the event loop only)."""
        self.idle = Idle()
        """Whether a filter or prioritize call is being answered: the shadow and recording threads wait for it."""
        self.shadow: Shadow | None = None
        self.recorder: Recorder | None = None
        self.requeue: AfterFilter | None = None
        """`--requeue`: told of every filter answer (after it is sent) whether the pod may be retried later."""
        self.last_prioritize: tuple[Mapping[str, Any], list[str]] | None = None
        """The last names-mode prioritize call's pod and candidates, which `--refresh-ahead` evaluates again."""

    def deadline(self) -> float:
        """The deadline of a request that starts now, as a `time.monotonic()` value."""
        return time.monotonic() + self.settings.request_deadline

    async def evaluate(self, book: RuleBook, call: Call) -> Decision:
        """`engine.evaluate` of the call, cut short at its deadline. A call the caches answer (a replica, say), or
        that needs little evaluation (`--loop-work`, from the rules' estimated costs: a new pod over cheap rules),
        is answered here; any other runs in the evaluation thread. Evaluations never overlap: the caches are not
        shared between threads. A call without an `estimate` is given the pod's from the usage store."""
        if call.estimate is None:
            call = call._replace(estimate=self.estimate(call.pod))
        work = functools.partial(evaluate, prepared(book), call)
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

    async def body(self, request: Request) -> bytes:
        """The whole body, at most `--max-body-bytes`, arrived within `--body-timeout`."""
        limit = self.settings.max_body_bytes
        for name, value in request.scope["headers"]:  # ASGI: names in lower case; read as they are, not parsed
            if name == b"content-length":
                if value.isdigit() and int(value) > limit:
                    raise BodyTooLargeError
                break
        receive = request.receive
        first = []
        if request.scope.get(BODY_ARRIVED):  # here already: taken without a timer (`asyncio.timeout` costs 3 µs)
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                body: bytes = message.get("body", b"")
                if len(body) > limit:
                    raise BodyTooLargeError
                return body
            first.append(message)  # any other (a disconnect, say): read below as any message is
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.settings.body_timeout):
                while True:
                    message = first.pop() if first else await receive()
                    if message["type"] == "http.disconnect":
                        raise ClientDisconnect
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise BodyTooLargeError
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise BodyTimeoutError from None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

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
        self, verb: str, args: wire.ExtenderArgs, call: tuple[datetime.datetime, RuleBook], found: Found
    ) -> Callable[[], None] | None:
        """What to run once the answer is sent (None: nothing); `call`: the time the rules saw and the book."""
        if not self.handing_on():
            return None
        now, book = call
        contexts, unknown, decision = found
        item = Answered(
            verb, args.nodes is not None, args.pod, contexts, unknown, self.namespace(args.pod), now, book, decision,
            self.estimate(args.pod),
        )  # fmt: skip
        return lambda: self.hand_on(item)

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


class AfterAnswer(BackgroundTask):
    """What a filter or prioritize call does once its answer is sent (Starlette runs a response's `background`
    right after its last byte is written, and the event loop reads no other call before it is done): each
    step in turn (count the pod on the node ranked first, log and count the decision, count the request, hand
    the call on to the shadow book), then free the request, turn the collector back on and pay the young
    collection the request owes. kube-scheduler waits for none of it. A step that fails is logged and the
    next still runs: the answer is out, nothing can change it."""

    def __init__(self, garbage: list[object], steps: list[Callable[[], None]]) -> None:
        # Not BackgroundTask's own: its `func` and `args` go unused (`__call__` is this class's), and its
        # inspection of `func` cost 1 µs a call.
        self.garbage, self.steps = garbage, steps

    async def __call__(self) -> None:
        for step in self.steps:
            try:
                step()
            except Exception:
                log.exception("internal error after an answer was sent")
        # Collected last, once the call's objects are freed: they would survive into the older generation,
        # whose collections would then take longer (a few every thousand calls, past the next call's arrival).
        self.steps.clear()
        self.garbage.clear()
        gc.enable()
        counts, thresholds = gc.get_count(), gc.get_threshold()
        if counts[0] >= thresholds[0]:  # else the collector owes nothing yet: it would not have run
            gc.collect(1 if counts[1] >= thresholds[1] else 0)


Resume = Callable[..., Response]


class _NoCollection:
    """No garbage collection while a request is answered; it resumes once the answer is sent.

    Decoding a request allocates up to millions of objects (full mode), each of which counts toward
    the collector's thresholds; collections in the middle of it scan everything cached and cost tens of
    milliseconds, while almost all of those objects are freed by reference counting when the request ends.
    The block wraps its answer with the function it is given, so that the collection it owes runs after
    the answer is on its way (kube-scheduler does not wait for it), and then the `steps` it is given to run
    after the answer (log the decision, hand the call on to the shadow book: `AfterAnswer`); on an error it
    resumes at once. If an answer is never sent, the next one turns the collector back on. What the function
    is also given (`garbage`: the decoded request, say) is freed then too: in full mode that is millions of
    objects, whose freeing would otherwise delay the answer by milliseconds.
    """

    __slots__ = ("deferred",)

    def __init__(self) -> None:
        self.deferred = False

    def __enter__(self) -> Resume:
        gc.disable()
        return self.resume_after

    def resume_after(self, response: Response, garbage: list[object], *steps: Callable[[], None] | None) -> Response:
        response.background, self.deferred = AfterAnswer(garbage, [step for step in steps if step is not None]), True
        return response

    def __exit__(self, *failure: object) -> None:
        if not self.deferred:
            gc.enable()


class _Answering:
    """A filter or prioritize call is being answered: the shadow and recording threads, when there are
    any, wait meanwhile."""

    __slots__ = ("idle",)

    def __init__(self, extender: Extender) -> None:
        self.idle = extender.idle if extender.handing_on() else None

    def __enter__(self) -> None:
        if self.idle is not None:
            self.idle.busy()

    def __exit__(self, *failure: object) -> None:
        if self.idle is not None:
            self.idle.done()


def _now(extender: Extender) -> datetime.datetime | None:
    """The time the rules see, fixed here when the call is handed on (so its shadow sees the same)."""
    return datetime.datetime.now(datetime.UTC) if extender.handing_on() else None


async def filter_verb(extender: Extender, request: Request) -> Response:
    return await _decide(extender, request, Verb.FILTER)


async def prioritize_verb(extender: Extender, request: Request) -> Response:
    return await _decide(extender, request, Verb.PRIORITIZE)


async def _decide(extender: Extender, request: Request, verb: Verb) -> Response:
    """A filter or prioritize call: read, evaluated, answered; what follows the answer is handed on."""
    deadline = extender.deadline()
    body = await extender.body(request)
    with _Answering(extender), _NoCollection() as resume_after:
        args = extender.args(body)
        started = time.perf_counter()
        book, now = extender.book(), _now(extender)
        garbage: list[object] = [args]
        extender.forget(args.pod)
        contexts, unknown = await extender.candidates(args, garbage)
        names = args.node_names if not unknown else None  # the request's: they make the answer
        call = Call(args.pod, contexts, verb, now, deadline, extender.namespace(args.pod), True, names)
        decision = await extender.evaluate(book, call)
        if verb is Verb.FILTER:
            (response, passed), reserve = _filtered(args, unknown, decision), None
        else:
            response, passed, reserve = _prioritized(extender, args, unknown, decision)
        seconds = time.perf_counter() - started
        observe = functools.partial(
            extender.observer.decision, verb, args.pod, decision, len(args.names), seconds, passed=passed
        )
        then = extender.answered(verb, args, (now, book), (contexts, unknown, decision)) if now else None
        requeue = extender.requeue.after_filter(args.pod, args.names, passed > 0) if extender.requeue else None
        return resume_after(response, garbage, reserve, observe, then, requeue if verb is Verb.FILTER else None)


def _filtered(args: wire.ExtenderArgs, unknown: Mapping[str, str], decision: Decision) -> tuple[Response, int]:
    """The answer to a filter call (the nodes that pass, and why each other does not), and how many pass."""
    passed, failed, unresolvable = decision.outcome()  # in candidate order: the order of the request
    if unknown:
        unresolvable.update(unknown)
    if args.nodes is not None:
        answer = wire.filter_result(args.passing(set(passed)), None, failed, unresolvable)
    else:
        answer = wire.filter_result(None, passed, failed, unresolvable)
    return json_response(answer), len(passed)


def _prioritized(
    extender: Extender, args: wire.ExtenderArgs, unknown: Mapping[str, str], decision: Decision
) -> tuple[Response, int, Callable[[], None] | None]:
    """The answer to a prioritize call, how many nodes it scored, and the step that counts the pod on the node
    ranked first once the answer is sent (before any other call is read: the event loop does nothing between)."""
    names = decision.names
    if args.node_names is not None and not unknown:
        extender.last_prioritize = (args.pod, args.node_names)
    if len(names) == len(args.names):  # every candidate evaluated, in the request's order
        response = _encoded(wire.host_priorities(names, decision.verdicts))
    else:
        found = dict(zip(names, decision.scores(), strict=True))
        response = json_response(wire.host_priority_list({name: found.get(name, 0) for name in args.names}))
    reserve = functools.partial(extender.reserve, args.pod, decision) if extender.cluster.pods else None
    return response, len(names), reserve


async def preempt_verb(extender: Extender, request: Request) -> Response:
    deadline = extender.deadline()
    args = wire.ExtenderPreemptionArgs.parse(await extender.body(request), extender.settings.max_candidates)
    book = extender.book()
    contexts = await extender.in_evaluator(len(args.victims), lambda: extender.preempt_contexts(args.victims))
    decision = await extender.evaluate(
        book, Call(args.pod, contexts, Verb.PREEMPT, None, deadline, extender.namespace(args.pod))
    )
    kept = {name: v for name, v in args.victims.items() if name in decision.nodes and decision.nodes[name].passed}
    return json_response(wire.preemption_result(kept))


async def bind_verb(extender: Extender, request: Request) -> Response:
    args = wire.ExtenderBindingArgs.parse(await extender.body(request))
    binder = extender.cluster.binder
    if binder is None:
        return json_response(wire.binding_result("rulesched does not bind pods: start it with --enable-bind"))
    error = await run_in_threadpool(binder.bind, args.pod_namespace, args.pod_name, args.pod_uid, args.node)
    if not error and extender.cluster.pods is not None:
        bound = {"metadata": {"namespace": args.pod_namespace, "name": args.pod_name, "uid": args.pod_uid}}
        extender.cluster.pods.reserve(bound, args.node)
    return json_response(wire.binding_result(error))


async def explain_verb(extender: Extender, request: Request) -> Response:
    if not extender.settings.enable_explain:
        return error_response(404, "explain is disabled: start rulesched serve with --enable-explain")
    deadline = extender.deadline()
    args = extender.args(await extender.body(request))
    book_name = request.query_params.get("book", "live")
    if book_name not in ("live", "shadow"):
        return error_response(400, f"book must be live or shadow, not {book_name!r}")
    if book_name == "shadow" and extender.shadow is None:
        return error_response(404, "no shadow rules: start rulesched serve with --shadow-rules DIR")
    contexts, unknown = await extender.candidates(args)
    now = datetime.datetime.now(datetime.UTC)
    book = extender.book()
    decision = await extender.evaluate(
        book, Call(args.pod, contexts, Verb.EXPLAIN, now, deadline, extender.namespace(args.pod))
    )
    if extender.shadow is not None and book_name == "shadow":
        answered = Answered(
            "explain", args.nodes is not None, args.pod, contexts, unknown, None, now, book, decision,
            extender.estimate(args.pod),
        )  # fmt: skip
        try:
            decision = await extender.shadow.explain(replace(answered, namespace=extender.namespace(args.pod)))
        except LookupError as error:
            return error_response(404, str(error))
    ages = extender.contexts.custom_ages
    estimate = estimate_or_fallback(extender.estimate(args.pod), args.pod)
    report = decision.explain(args.pod) | context_report(
        args.pod, extender.namespace(args.pod), contexts, ages, estimate
    )
    report["unknownNodes"] = unknown
    if book_name == "shadow":
        report["book"] = "shadow"
    return json_response(report)
