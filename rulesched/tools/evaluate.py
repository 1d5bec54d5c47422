"""`rulesched eval`: one expression, compiled and evaluated in the rules' environment.

The same variables as a rule (pod, node, metrics, allocatable, requests, variables, now), the same
engine, functions and limits: the expression is compiled and type-checked as a rule is, its cost
estimated against the cost limit, then evaluated once. The answer is one JSON object: `{"value": ...}`, or
`{"error": {"kind": "compile" | "runtime" | "cost", "message": ...}}`; nothing an expression does ends in a
traceback.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rulesched.cluster.sources import FileMetricsSource
from rulesched.rules.cel import CelCompileError, CelEvalError, Engine, EngineName, make_engine
from rulesched.rules.cel.cost import CostEstimateError, estimate, over_limit_message
from rulesched.rules.cel.typecheck import TypeCheckError, line_column, typed
from rulesched.rules.context import NO_CUSTOM, node_addresses, node_context
from rulesched.rules.pod_values import pod_requests
from rulesched.tools.inputs import read_metrics, read_nodes, read_pod

ErrorKind = Literal["compile", "runtime", "cost"]


@dataclass(frozen=True, slots=True)
class EvalInputs:
    """The files `rulesched eval` reads; None: an empty object."""

    pod: Path | str | None = None
    node: Path | None = None
    metrics: Path | None = None


def context_values(inputs: EvalInputs, now: datetime.datetime | None = None) -> dict[str, Any]:
    """The values of every context name for the given files (raises `InputError` on a bad file)."""
    now = now or datetime.datetime.now(datetime.UTC)
    pod = read_pod(inputs.pod) if inputs.pod is not None else {}
    values: dict[str, Any] = {"pod": pod, "requests": pod_requests(pod), "variables": {}, "now": now}
    if inputs.node is None:
        return values | {"node": {}, "metrics": {}, "allocatable": {}}
    node = read_nodes(inputs.node)[0]
    source = read_metrics(inputs.metrics)
    name = node["metadata"]["name"]
    custom = source.custom if isinstance(source, FileMetricsSource) else None
    values_of = custom.custom(name, node_addresses(node)) if custom is not None else NO_CUSTOM
    context = node_context(node, source.usage(name) if source else None, now, custom=values_of)
    return values | {"node": context.node, "metrics": context.metrics, "allocatable": context.allocatable}


def evaluate_expression(expression: str, engine: Engine, values: Mapping[str, Any]) -> dict[str, Any]:
    """`{"value": ...}` or `{"error": {"kind": ..., "message": ...}}` for `expression` over `values`."""
    try:
        program = engine.compile(expression)
        typed(expression, {}, engine.limits.unknown_fields)
    except CelCompileError as error:
        return _error("compile", _located(error.message, error.line, error.column))
    except TypeCheckError as error:
        return _error("compile", _located(error.message, *line_column(expression, error.position)))
    limit = engine.limits.cost
    try:
        found = estimate(expression, limit=limit)
    except CostEstimateError as error:
        return _error("cost", str(error))
    if found.cost > limit:
        line, column = found.position or (None, None)
        return _error("cost", _located(over_limit_message(found, limit), line, column))
    bindings = engine.bindings({name: engine.convert(value) for name, value in values.items()})
    try:
        return {"value": _json_value(program.evaluate(bindings))}
    except CelEvalError as error:
        return _error("runtime", str(error))


def run_eval(expression: str, engine_name: EngineName, inputs: EvalInputs) -> dict[str, Any]:
    """The answer of `rulesched eval` (raises `InputError` for a file that cannot be read)."""
    return evaluate_expression(expression, make_engine(engine_name), context_values(inputs))


def render(answer: Mapping[str, Any], output: str) -> str:
    """The answer as printed: one JSON object (json), or the value alone / the error (text)."""
    if output == "json":
        return json.dumps(answer, ensure_ascii=False) + "\n"
    if "value" in answer:
        return json.dumps(answer["value"], ensure_ascii=False, indent=2) + "\n"
    error = answer["error"]
    return f"{error['kind']} error: {error['message']}\n"


def _error(kind: ErrorKind, message: str) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message}}


def _located(message: str, line: int | None, column: int | None) -> str:
    return f"{message} (at {line}:{column})" if line and column else message


def _json_value(value: Any) -> Any:
    """A CEL result as JSON: timestamps as RFC 3339, durations as seconds ("1.5s"), bytes as base64."""
    if isinstance(value, Mapping):
        return {str(_json_value(k)): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, (bytes, bytearray)):  # cel-cpp gives bytes as a bytearray
        return base64.b64encode(value).decode()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
