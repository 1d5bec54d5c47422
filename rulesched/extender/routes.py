"""The extender verbs: filter, prioritize, preempt, bind, explain — each a thin layer over the engine.

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
from collections.abc import Callable, Mapping
from dataclasses import replace

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from rulesched.decide.decision import Decision
from rulesched.decide.verbs import Call, Verb
from rulesched.extender import wire
from rulesched.extender.after import NoCollection
from rulesched.extender.responses import encoded, error_response, json_response
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
    """A filter or prioritize call: read, evaluated, answered; what follows the answer is handed on."""
    deadline = extender.deadline()
    body = await extender.body(request)
    with NoCollection() as resume_after:
        args = extender.args(body)
        started = time.perf_counter()
        book, now = extender.book(), _now(extender)
        garbage: list[object] = [args]
        extender.forget(args.pod)
        contexts, unknown = await extender.candidates(args, garbage)
        names = args.node_names if not unknown else None  # the request's: they make the answer
        estimate = extender.estimate_for(book, args.pod)
        call = Call(args.pod, contexts, verb, now, deadline, extender.namespace(args.pod), True, names, estimate)
        decision = await extender.evaluate(book, call)
        if verb is Verb.FILTER:
            (response, passed), reserve = _filtered(args, unknown, decision), None
            if extender.recent is not None:
                extender.recent.seen(args.pod, contexts)
        else:
            response, passed, reserve = _prioritized(extender, args, unknown, decision)
        seconds = time.perf_counter() - started
        observe = functools.partial(
            extender.observer.decision, verb, args.pod, decision, len(args.names), seconds, passed=passed
        )
        then = extender.answered(verb, args, (now, book), (contexts, unknown, decision), estimate) if now else None
        requeue = None
        if extender.requeue is not None and verb is Verb.FILTER:  # prioritize's candidates passed already
            requeue = extender.requeue.after_filter(args.pod, args.names, passed > 0)
        return resume_after(response, garbage, reserve, observe, then, requeue)


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
        response = encoded(wire.host_priorities(names, decision.verdicts))
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
