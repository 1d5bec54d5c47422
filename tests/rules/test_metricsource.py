"""`kind: MetricSource` documents in the rules directory: loaded with the rule sets, all or nothing.

A rule that reads a custom metric no MetricSource defines, a MetricSource with an invalid URL, repeated
query names or invalid durations: each is a load error with file, line and field, all reported at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rulesched.rules.cel import Engine
from rulesched.rules.errors import LoadError, RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.rules.metricsource import parse_duration

SOURCE = """\
apiVersion: rulesched.io/v1alpha1
kind: MetricSource
metadata: {name: prometheus}
spec:
  prometheus:
    url: http://prometheus-k8s.monitoring.svc:9090
    interval: 15s
    timeout: 5s
    maxAge: 60s
  queries:
  - name: cpu5m
    query: 1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[5m]))
    nodeLabel: node
"""

RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {name: windowed}
spec:
  filters:
  - name: not-busy
    expression: "!has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.9"
  scores:
  - name: idle
    expression: "has(metrics.custom.cpu5m) ? 1.0 - metrics.custom.cpu5m : 0.0"
"""


def write(directory: Path, **files: str) -> Path:
    for name, text in files.items():
        (directory / f"{name}.yaml").write_text(text)
    return directory


def errors_of(directory: Path, engine: Engine) -> list[str]:
    with pytest.raises(RulesLoadFailed) as failure:
        load_rule_book([directory], engine)
    return [str(e) for e in failure.value.errors]


def test_a_metric_source_loads_with_the_rules_that_read_it(tmp_path: Path, engine: Engine) -> None:
    book = load_rule_book([write(tmp_path, source=SOURCE, rules=RULES)], engine)
    (source,) = book.metric_sources
    assert (source.metadata.name, source.spec.prometheus.interval, source.spec.prometheus.maxAge) == (
        "prometheus",
        15.0,
        60.0,
    )
    assert [q.name for q in source.spec.queries] == ["cpu5m"]
    assert [rs.name for rs in book.rule_sets] == ["windowed"]


def test_a_rule_reading_an_undefined_custom_metric_is_a_load_error(tmp_path: Path, engine: Engine) -> None:
    typo = RULES.replace("1.0 - metrics.custom.cpu5m", "1.0 - metrics.custom.cpu5n")
    errors = errors_of(write(tmp_path, source=SOURCE, rules=typo), engine)
    assert errors == [
        f"{tmp_path}/rules.yaml:10: windowed/idle: spec.scores[0].expression: metrics.custom.cpu5n is not defined "
        "by any MetricSource (defined: cpu5m) in 'has(metrics.custom.cpu5m) ? 1.0 - metrics.custom.cpu5n : 0.0'"
    ]


def test_without_a_metric_source_no_custom_metric_is_defined(tmp_path: Path, engine: Engine) -> None:
    errors = errors_of(write(tmp_path, rules=RULES), engine)
    assert [e.split(": ", 3)[-1][:60] for e in errors] == [
        "metrics.custom.cpu5m is not defined by any MetricSource (def",
        "metrics.custom.cpu5m is not defined by any MetricSource (def",
    ]


def test_an_invalid_metric_source_reports_every_problem(tmp_path: Path, engine: Engine) -> None:
    broken = (
        SOURCE.replace("http://prometheus-k8s.monitoring.svc:9090", "prometheus-k8s:9090")
        .replace("interval: 15s", "interval: 15 seconds")
        .replace("maxAge: 60s", "maxAge: -1s")
        .replace("nodeLabel: node", "nodeLabel: node\n  - name: cpu5m\n    query: up\n    nodeLable: node")
    )
    errors = errors_of(write(tmp_path, source=broken, rules=RULES), engine)
    where = f"{tmp_path}/source.yaml"
    assert errors == [
        f"{where}:6: prometheus: spec.prometheus.url: Value error, want an http:// or https:// URL with a host, "
        "such as http://prometheus:9090",
        f"{where}:7: prometheus: spec.prometheus.interval: Value error, invalid duration '15 seconds': want a "
        "duration such as 15s, 1m or 500ms",
        f"{where}:9: prometheus: spec.prometheus.maxAge: Value error, invalid duration '-1s': want a duration "
        "such as 15s, 1m or 500ms",
        f"{where}:16: prometheus/cpu5m: spec.queries[1].nodeLable: Extra inputs are not permitted",
    ]


def test_query_names_are_unique_across_metric_sources(tmp_path: Path, engine: Engine) -> None:
    other = SOURCE.replace("name: prometheus}", "name: thanos}")
    errors = errors_of(write(tmp_path, a=SOURCE, b=other, rules=RULES), engine)
    assert errors == [
        f"{tmp_path}/b.yaml:11: thanos: spec.queries[0].name: duplicate query name 'cpu5m': already defined by "
        "MetricSource prometheus"
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timeout: 5s": "timeout: 30s"}, "timeout must not be longer than interval: polls would overlap"),
        ({"maxAge: 60s": "maxAge: 5s"}, "maxAge must not be shorter than interval"),
        ({"url: http://": "url: ftp://"}, "want an http:// or https:// URL"),
        ({"9090": "9090/?x=1"}, "the URL must not have a query or fragment"),
        ({"nodeLabel: node": "nodeLabel: node-name"}, "String should match pattern"),
        ({"name: cpu5m": "name: cpu-5m"}, "String should match pattern"),
    ],
)
def test_metric_source_checks(tmp_path: Path, engine: Engine, changes: dict[str, str], message: str) -> None:
    text = SOURCE
    for old, new in changes.items():
        text = text.replace(old, new)
    errors = errors_of(write(tmp_path, source=text), engine)
    assert len(errors) == 1
    assert message in errors[0]


@pytest.mark.parametrize(
    ("text", "seconds"), [("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0), ("1d", 86400.0), (30, 30.0)]
)
def test_durations_are_written_as_in_prometheus(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "15", "0s", "1y", "s", "15 s", True, None])
def test_invalid_durations_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_load_errors_name_the_query(tmp_path: Path, engine: Engine) -> None:
    errors = load_errors_of(
        write(tmp_path, source=SOURCE.replace("query: 1 - avg", "query: ''\n    x: 1 - avg")), engine
    )
    assert {(e.rule_set, e.rule, e.field) for e in errors} == {
        ("prometheus", "cpu5m", "spec.queries[0].query"),
        ("prometheus", "cpu5m", "spec.queries[0].x"),
    }


def load_errors_of(directory: Path, engine: Engine) -> tuple[LoadError, ...]:
    with pytest.raises(RulesLoadFailed) as failure:
        load_rule_book([directory], engine)
    return failure.value.errors
