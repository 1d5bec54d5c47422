"""The `kind: MetricSource` documents of a rules directory: Prometheus queries whose per-node answers the rules
read as `metrics.custom.<name>` (docs/rules/prometheus.md), and the per-pod usage queries (`podUsage`) the
usage estimates learn from (docs/guides/usage-estimates.md).

They are validated with the rule sets (pydantic models, unknown fields forbidden) and checked against them:
a rule reading a custom metric that no MetricSource defines is a load error, found from the parsed
expression (`rules/cel/analysis.py`), so that a typo fails `rulesched check` instead of scoring 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from rulesched.rules.cel.analysis import fields, paths_of
from rulesched.rules.errors import LoadError
from rulesched.rules.model import Filter, Metadata, RuleSet, Score, Variable

KIND = "MetricSource"
MAX_QUERIES = 64
"""Queries one MetricSource may hold (each is polled by its own thread)."""

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h|d))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object) -> float:
    """A Prometheus-style duration (`15s`, `1m30s`, `500ms`) or a number of seconds, as seconds > 0."""
    if isinstance(value, bool):
        raise ValueError("want a duration such as 15s, 1m or 500ms")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and _DURATION.match(value.strip()):
        seconds = sum(float(n) * _UNIT[unit] for n, unit in _PART.findall(value))
    else:
        raise ValueError(f"invalid duration {value!r}: want a duration such as 15s, 1m or 500ms")
    if not 0 < seconds < 366 * 86400:
        raise ValueError(f"invalid duration {value!r}: must be more than 0 and less than a year")
    return seconds


DurationText = Annotated[str, Field(pattern=r"^\s*(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+\s*$")]
Duration = Annotated[
    float, BeforeValidator(parse_duration, json_schema_input_type=DurationText | Annotated[float, Field(gt=0)])
]
"""Seconds, written as a number or a Prometheus duration; the schema (`rulesched schema`) takes both forms."""


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("want an http:// or https:// URL with a host, such as http://prometheus:9090")
    if parts.query or parts.fragment:
        raise ValueError("the URL must not have a query or fragment: rulesched adds /api/v1/query")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as error:
        raise ValueError(f"invalid port: {error}") from error
    return value.rstrip("/")


MetricName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")]
"""A CEL identifier: read as `metrics.custom.<name>`."""
LabelName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
HeaderName = Annotated[str, Field(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrometheusServer(_Strict):
    """Where the queries go and how often; durations are Prometheus-style (`15s`, `1m`)."""

    url: Annotated[str, AfterValidator(_http_url)]
    interval: Duration = 15.0
    timeout: Duration = 5.0
    maxAge: Duration = 60.0
    bearerTokenFile: str | None = None
    caFile: str | None = None
    certFile: str | None = None
    keyFile: str | None = None
    insecureSkipVerify: Annotated[bool, Field(strict=True)] = False
    headers: dict[HeaderName, str] = {}

    @model_validator(mode="after")
    def _consistent(self) -> PrometheusServer:
        if self.timeout > self.interval:
            raise ValueError("timeout must not be longer than interval: polls would overlap")
        if self.maxAge < self.interval:
            raise ValueError("maxAge must not be shorter than interval: every value would age out between polls")
        if (self.certFile is None) != (self.keyFile is None):
            raise ValueError("certFile and keyFile go together")
        return self


PromQL = Annotated[str, Field(min_length=1, max_length=10_000)]


class MetricQuery(_Strict):
    """One PromQL query giving one value per node; read in rules as `metrics.custom.<name>`."""

    name: MetricName
    query: PromQL
    nodeLabel: LabelName = "node"


class PodUsage(_Strict):
    """Two PromQL queries giving one sample per pod, its CPU (cores) and its memory (bytes): what the usage
    estimates learn from; a series names its pod by the `namespaceLabel` and `podLabel` labels."""

    cpu: PromQL
    memory: PromQL
    namespaceLabel: LabelName = "namespace"
    podLabel: LabelName = "pod"

    @model_validator(mode="after")
    def _two_labels(self) -> PodUsage:
        if self.namespaceLabel == self.podLabel:
            raise ValueError("namespaceLabel and podLabel must differ: a pod is named by both")
        return self


_QUERIES_OR_POD_USAGE: JsonDict = {
    "if": {"not": {"required": ["podUsage"]}},
    "then": {"not": {"anyOf": [{"not": {"required": ["queries"]}}, {"properties": {"queries": {"maxItems": 0}}}]}},
}
"""What `_asks_something` checks, for the editors' schema."""


class MetricSourceSpec(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_QUERIES_OR_POD_USAGE)

    prometheus: PrometheusServer
    queries: Annotated[list[MetricQuery], Field(max_length=MAX_QUERIES)] = []
    podUsage: PodUsage | None = None

    @model_validator(mode="after")
    def _asks_something(self) -> MetricSourceSpec:
        if not self.queries and self.podUsage is None:
            raise ValueError("a MetricSource needs queries, podUsage or both")
        return self


class MetricSource(_Strict):
    """One `kind: MetricSource` document."""

    apiVersion: Literal["rulesched.io/v1alpha1"]
    kind: Literal["MetricSource"]
    metadata: Metadata
    spec: MetricSourceSpec


LineOf = Callable[[tuple[str | int, ...]], int | None]


def duplicate_names(sources: Sequence[tuple[str, MetricSource, LineOf]]) -> list[LoadError]:
    """Query names repeated across the MetricSources (they share `metrics.custom`), repeated sources, and a
    second `podUsage` (the usage store has one source of pod usage besides metrics-server)."""
    errors: list[LoadError] = []
    queries: dict[str, str] = {}
    names: dict[str, str] = {}
    pod_usage: str | None = None
    for file, source, line_of in sources:
        if source.spec.podUsage is not None and pod_usage is not None:
            message = f"podUsage is already declared by MetricSource {pod_usage}: the estimates learn from one"
            errors.append(_error(file, line_of, source, ("spec", "podUsage"), message))
        if source.spec.podUsage is not None:
            pod_usage = pod_usage or source.metadata.name
        if source.metadata.name in names:
            message = f"duplicate MetricSource name, already defined in {names[source.metadata.name]}"
            errors.append(_error(file, line_of, source, ("metadata", "name"), message))
        names.setdefault(source.metadata.name, file)
        for index, query in enumerate(source.spec.queries):
            if query.name in queries:
                message = f"duplicate query name {query.name!r}: already defined by {queries[query.name]}"
                errors.append(_error(file, line_of, source, ("spec", "queries", index, "name"), message))
            queries.setdefault(query.name, f"MetricSource {source.metadata.name}")
    return errors


def _error(file: str, line_of: LineOf, source: MetricSource, loc: tuple[str | int, ...], message: str) -> LoadError:
    field = ".".join(f"[{p}]" if isinstance(p, int) else p for p in loc).replace(".[", "[")
    return LoadError(file=file, line=line_of(loc), rule_set=source.metadata.name, field=field, message=message)


def _expressions(rule_set: RuleSet) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """(location, rule name, expression) of every expression in a rule set."""
    spec = rule_set.spec
    kinds: tuple[tuple[str, Sequence[Variable | Filter | Score]], ...] = (
        ("variables", spec.variables),
        ("filters", spec.filters),
        ("scores", spec.scores),
    )
    for kind, rules in kinds:
        for index, rule in enumerate(rules):
            yield ("spec", kind, index, "expression"), rule.name, rule.expression
            message = getattr(rule, "messageExpression", "")
            if message:
                yield ("spec", kind, index, "messageExpression"), rule.name, message


def custom_reads(expression: str) -> set[str]:
    """The custom metric names an expression reads by name (`metrics.custom.cpu5m` → cpu5m); testing the map
    itself (`has(metrics.custom)`) names none."""
    found = [fields(path) for path in paths_of([expression]).get("metrics", frozenset())]
    return {path[1] for path in found if len(path) >= 2 and path[0] == "custom"}


def undefined_metrics(rule_set: RuleSet, file: str, line_of: LineOf, defined: frozenset[str]) -> list[LoadError]:
    """Every read of `metrics.custom.<name>` in `rule_set` whose name no MetricSource defines."""
    errors = []
    known = ", ".join(sorted(defined)) or "none"
    for loc, rule, expression in _expressions(rule_set):
        for name in sorted(custom_reads(expression) - defined):
            message = f"metrics.custom.{name} is not defined by any MetricSource (defined: {known})"
            field = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")
            errors.append(
                LoadError(
                    file=file,
                    line=line_of(loc),
                    rule_set=rule_set.metadata.name,
                    rule=rule,
                    field=field,
                    message=message,
                    expression=expression,
                )
            )
    return errors
