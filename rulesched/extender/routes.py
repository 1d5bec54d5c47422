"""The extender verbs: filter, prioritize, preempt, bind, explain — each a pipeline read top to bottom.

A verb's steps, in order: read the body (`body.py`), parse it (`wire.py`), gather the node contexts and the
rest the rules read (`gather.py`; the pod's namespace and estimate from the shared state), decide (the engine,
through `Extender.evaluate`), answer (`responses.py`), hand on (`hand_on.py`: what runs once the answer is sent).
Each step is a function of its inputs; `Extender` only holds the state they share.

Every handler reads the active RuleBook once, so a request is answered by one generation of the
rules. Bad input is a 400 with a JSON reason; nothing here lets an exception reach a worker. The
garbage collector pauses while filter and prioritize are answered (see `NoCollection`).

Rules are evaluated in one worker thread (`Extender.evaluate`), one request at a time, so that the event
loop keeps answering /healthz and /readyz meanwhile; a call the caches answer, or one that needs little
evaluation (`--loop-work`), is answered on the loop, without the trip to the thread. Each request has a
deadline (settings `request_deadline`), past which the rules not yet evaluated follow their failurePolicy.
"""

from __future__ import annotations

import datetime
import functools
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from rulesched.decide.verbs import Call, Verb
from rulesched.extender import gather, hand_on, responses, wire
from rulesched.extender.after import NoCollection
from rulesched.extender.body import body_of
from rulesched.extender.responses import error_response, json_response
from rulesched.extender.state import Extender
from rulesched.handoff.answered import Answered
from rulesched.rules.context import context_report
from rulesched.rules.estimate import estimate_or_fallback


def _now(extender: Extender) -> datetime.datetime | None:
    """The time the rules see, fixed here when the call is handed on (so its shadow sees the same)."""
    return datetime.datetime.now(datetime.UTC) if extender.handing_on() else None


async def filter_verb(extender: Extender, request: Request) -> Response:
    return await _decide(extender, request, Verb.FILTER)


async def prioritize_verb(extender: Extender, request: Request) -> Response:
    return await _decide(extender, request, Verb.PRIORITIZE)


async def _decide(extender: Extender, request: Request, verb: Verb) -> Response:
    """A filter or prioritize call: read, parse, gather, decide, answer; what follows the answer is handed on."""
    settings, deadline = extender.settings, extender.deadline()
    body = await body_of(request, settings)
    with NoCollection() as resume_after:
        args = wire.ExtenderArgs.parse(body, settings.max_candidates, extender.texts)
        started = time.perf_counter()
        book, now = extender.book(), _now(extender)
        garbage: list[object] = [args]
        gather.forget(extender.cluster.pods, args.pod)
        contexts, unknown = await gather.candidates(extender, args, garbage)
        namespace, estimate = extender.namespace(args.pod), extender.estimate_for(book, args.pod)
        names = args.node_names if not unknown else None  # the request's: they make the answer
        call = Call(args.pod, contexts, verb, now, deadline, namespace, True, names, estimate)
        decision = await extender.evaluate(book, call)
        if verb is Verb.FILTER:
            response, passed = responses.filtered(args, unknown, decision)
        else:
            response, passed = responses.prioritized(args, decision)
        seconds = time.perf_counter() - started
        if verb is Verb.FILTER:  # prioritize's candidates passed already: nothing for requeue
            reserve, requeue = None, hand_on.after_filter(extender, args, contexts, passed)
        else:
            reserve, requeue = hand_on.after_prioritize(extender, args, unknown, decision), None
        observe = functools.partial(
            extender.observer.decision, verb, args.pod, decision, len(args.names), seconds, passed=passed
        )
        then = None
        if now:  # the time is fixed only for a call handed on (`_now`)
            full = args.nodes is not None
            answered = Answered(verb, full, args.pod, contexts, unknown, namespace, now, book, decision, estimate)
            then = hand_on.answered(extender, answered)
        return resume_after(response, garbage, reserve, observe, then, requeue)


async def preempt_verb(extender: Extender, request: Request) -> Response:
    """A preempt call: read, parse, gather (each candidate as its victims' eviction would leave it), decide,
    answer (the victims of the nodes that pass)."""
    settings, deadline = extender.settings, extender.deadline()
    args = wire.ExtenderPreemptionArgs.parse(await body_of(request, settings), settings.max_candidates)
    book = extender.book()
    contexts = await extender.in_evaluator(len(args.victims), lambda: gather.preempt_contexts(extender, args.victims))
    namespace = extender.namespace(args.pod)
    decision = await extender.evaluate(book, Call(args.pod, contexts, Verb.PREEMPT, None, deadline, namespace))
    return responses.preempted(args, decision)


async def bind_verb(extender: Extender, request: Request) -> Response:
    """A bind call: read, parse, bind (`--enable-bind`), answer; the pod is counted on its node at once."""
    args = wire.ExtenderBindingArgs.parse(await body_of(request, extender.settings))
    binder = extender.cluster.binder
    if binder is None:
        return json_response(wire.binding_result("rulesched does not bind pods: start it with --enable-bind"))
    error = await run_in_threadpool(binder.bind, args.pod_namespace, args.pod_name, args.pod_uid, args.node)
    if not error and extender.cluster.pods is not None:
        bound = {"metadata": {"namespace": args.pod_namespace, "name": args.pod_name, "uid": args.pod_uid}}
        extender.cluster.pods.reserve(bound, args.node)
    return json_response(wire.binding_result(error))


async def explain_verb(extender: Extender, request: Request) -> Response:
    """An explain call: read, parse, gather, decide (with the live book, then the shadow one when asked), answer
    with the report of every rule on every node and of what the rules read."""
    settings = extender.settings
    if not settings.enable_explain:
        return error_response(404, "explain is disabled: start rulesched serve with --enable-explain")
    deadline = extender.deadline()
    args = wire.ExtenderArgs.parse(await body_of(request, settings), settings.max_candidates, extender.texts)
    book_name = request.query_params.get("book", "live")
    if book_name not in ("live", "shadow"):
        return error_response(400, f"book must be live or shadow, not {book_name!r}")
    if book_name == "shadow" and extender.shadow is None:
        return error_response(404, "no shadow rules: start rulesched serve with --shadow-rules DIR")
    contexts, unknown = await gather.candidates(extender, args)
    namespace, estimate = extender.namespace(args.pod), extender.estimate(args.pod)
    now = datetime.datetime.now(datetime.UTC)
    book = extender.book()
    decision = await extender.evaluate(book, Call(args.pod, contexts, Verb.EXPLAIN, now, deadline, namespace))
    if extender.shadow is not None and book_name == "shadow":
        full = args.nodes is not None
        answered = Answered("explain", full, args.pod, contexts, unknown, namespace, now, book, decision, estimate)
        try:
            decision = await extender.shadow.explain(answered)
        except LookupError as error:
            return error_response(404, str(error))
    seen = estimate_or_fallback(estimate, args.pod)
    report = decision.explain(args.pod) | context_report(
        args.pod, namespace, contexts, extender.contexts.custom_ages, seen
    )
    report["unknownNodes"] = unknown
    if book_name == "shadow":
        report["book"] = "shadow"
    return json_response(report)
