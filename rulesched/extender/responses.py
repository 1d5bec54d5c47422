"""The answer step: each verb's answer made from its Decision, and the JSON responses of the HTTP edge (a body
already encoded, sent with the headers Starlette would give it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

from rulesched.decide.decision import Decision
from rulesched.extender import wire


class JsonResponse(Response):
    """A JSON body already encoded, with the headers Starlette's `Response` would give it (content-length,
    content-type), set directly: every filter and prioritize answer is one."""

    media_type = "application/json"

    def __init__(self, body: bytes, status_code: int = 200) -> None:
        self.status_code, self.body, self.background = status_code, body, None
        self.raw_headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]


def json_response(content: Any, status_code: int = 200) -> Response:
    return JsonResponse(orjson.dumps(content), status_code)


def encoded(body: bytes) -> Response:
    return JsonResponse(body)


def error_response(status_code: int, message: str) -> Response:
    return json_response({"error": message}, status_code)


def filtered(args: wire.ExtenderArgs, unknown: Mapping[str, str], decision: Decision) -> tuple[Response, int]:
    """The answer to a filter call (the nodes that pass, and why each other does not), and how many pass."""
    passed, failed, unresolvable = decision.outcome()  # in candidate order: the order of the request
    if unknown:
        unresolvable.update(unknown)
    if args.nodes is not None:
        answer = wire.filter_result(args.passing(set(passed)), None, failed, unresolvable)
    else:
        answer = wire.filter_result(None, passed, failed, unresolvable)
    return json_response(answer), len(passed)


def prioritized(args: wire.ExtenderArgs, decision: Decision) -> tuple[Response, int]:
    """The answer to a prioritize call, and how many nodes it scored."""
    names = decision.names
    if len(names) == len(args.names):  # every candidate evaluated, in the request's order
        return encoded(wire.host_priorities(names, decision.verdicts)), len(names)
    found = dict(zip(names, decision.scores(), strict=True))
    return json_response(wire.host_priority_list({name: found.get(name, 0) for name in args.names})), len(names)


def preempted(args: wire.ExtenderPreemptionArgs, decision: Decision) -> Response:
    """The answer to a preempt call: the victims of the candidates on which the pod passes the filters."""
    nodes = decision.nodes
    kept = {name: v for name, v in args.victims.items() if name in nodes and nodes[name].passed}
    return json_response(wire.preemption_result(kept))
