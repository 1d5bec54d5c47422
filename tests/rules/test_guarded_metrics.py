"""Custom metrics read behind guards: every guard form loads, names what it reads, and decides on both engines.

`has(metrics.custom)` tests whether `metrics` has `custom` (always, in a node's context), so it names
no custom metric; `has(metrics.custom.cpu5m)`, `metrics.custom.?cpu5m`, `metrics.custom[?'cpu5m']`,
`metrics.custom['cpu5m']` and `'cpu5m' in metrics.custom` name `cpu5m`, which a MetricSource must
define. Each form is loaded with the MetricSource of `tests/test_metricsource.py`, decided by the fast
engine on nodes with and without a value, and compared with the reference evaluation; `check`, `eval`
and `replay` accept the guarded rule of issue #23. (The running server against a loopback Prometheus:
`tests/cluster/test_guarded_prometheus.py`.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.decide import reference
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import ENGINE_NAMES, CelCompileError, Engine
from rulesched.rules.cel.analysis import PRESENT, fields, paths
from rulesched.rules.cel.cost import estimate
from rulesched.rules.context import NodeContext, NodeCustom, node_context
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.rules.metricsource import custom_reads
from tests.builders import NOW, make_pod
from tests.recordings import record
from tests.rulebooks import LIVE, rules_dir
from tests.rules.test_metricsource import SOURCE

ISSUE_RULE = "!has(metrics.custom) || !has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.9"
"""The rule of issue #23, refused at load before the fix."""

GUARDS = [
    ISSUE_RULE,
    "has(metrics.custom) && (!has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.5)",
    "metrics.?custom.?cpu5m.orValue(0.0) < 0.5",
    "metrics.custom.?cpu5m.orValue(0.0) < 0.5",
    "metrics.custom[?'cpu5m'].orValue(0.0) < 0.5",
    "!('cpu5m' in metrics.custom) || metrics.custom['cpu5m'] < 0.5",
    "metrics.custom.all(k, metrics.custom[k] < 0.5)",
    "metrics.custom.exists(k, k == 'cpu5m') ? metrics.custom.cpu5m < 0.5 : true",
    "cel.bind(c, metrics.custom, !has(c.cpu5m) || c.cpu5m < 0.5)",
    "cel.bind(m, metrics, has(m.custom) && m.custom.all(k, m.custom[k] < 0.5))",
    "[1].exists(x, !has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.5)",
    "has(node.metadata.labels) && has(metrics.custom) && metrics.custom.size() >= 0",
]
"""Filters that pass a node without a value and one at 0.2, and (but the last) fail one at 0.95."""

SCORES = [
    "has(metrics.custom.cpu5m) ? 10.0 * (1.0 - metrics.custom.cpu5m) : 0.0",
    "10.0 * (1.0 - metrics.?custom.?cpu5m.orValue(1.0))",
    "cel.bind(c, metrics.custom, 'cpu5m' in c ? 10.0 * (1.0 - c['cpu5m']) : 0.0)",
]
"""Scores that give a node without a value 0, one at 0.2 8, one at 0.95 0.5."""

VALUES = {"none": {}, "idle": {"cpu5m": 0.2}, "busy": {"cpu5m": 0.95}}


def guarded_rules(filters: list[str], scores: list[str]) -> str:
    lines = ["apiVersion: rulesched.io/v1alpha1", "kind: RuleSet", "metadata: {name: guarded}", "spec:", "  filters:"]
    lines += [f"  - name: f{i}\n    expression: {expression!r}" for i, expression in enumerate(filters)]
    lines += ["  scores:"] if scores else []
    lines += [f"  - name: s{i}\n    expression: {expression!r}" for i, expression in enumerate(scores)]
    return "\n".join(lines) + "\n"


def book_of(directory: Path, engine: Engine, rules: str) -> RuleBook:
    directory.mkdir(exist_ok=True)
    (directory / "source.yaml").write_text(SOURCE)
    (directory / "rules.yaml").write_text(rules)
    return load_rule_book([directory], engine)


def contexts() -> list[NodeContext]:
    return [
        node_context({"metadata": {"name": name, "labels": {}}}, None, now=NOW, custom=NodeCustom(values))
        for name, values in VALUES.items()
    ]


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("has(metrics.custom)", set()),
        ("!has(metrics.custom) || metrics.custom.size() == 0", set()),
        ("has(metrics.custom.cpu5m)", {"cpu5m"}),
        (ISSUE_RULE, {"cpu5m"}),
        ("metrics.?custom.?cpu5m.orValue(0.0)", {"cpu5m"}),
        ("metrics.?custom.orValue({}).size()", set()),
        ("metrics.custom[?'cpu5m'].orValue(0.0)", {"cpu5m"}),
        ("metrics.custom['cpu5m']", {"cpu5m"}),
        ("'cpu5m' in metrics.custom", {"cpu5m"}),
        ("metrics.custom.exists(k, metrics.custom[k] > 0.5)", set()),
        ("cel.bind(c, metrics.custom, has(c.cpu5m))", set()),
        ("[1].exists(x, has(metrics.custom.cpu5m) && has(metrics.custom))", {"cpu5m"}),
    ],
)
def test_each_form_names_exactly_the_custom_metrics_it_reads(source: str, named: set[str]) -> None:
    assert custom_reads(source) == named


CUSTOM = ("custom",)


@pytest.mark.parametrize(
    ("source", "selected"),
    [
        ("has(metrics.custom)", {(*CUSTOM, PRESENT)}),
        ("has(metrics.custom.cpu5m)", {(*CUSTOM, "cpu5m", PRESENT)}),
        ("metrics.?custom", {CUSTOM}),
        ("metrics.?custom.?cpu5m.orValue(0.0)", {(*CUSTOM, "cpu5m")}),
        ("metrics.custom[?'cpu5m']", {(*CUSTOM, "cpu5m")}),
        ("metrics.custom['cpu5m']", {(*CUSTOM, "cpu5m")}),
        ("has(metrics.custom) && 'cpu5m' in metrics.custom", {(*CUSTOM, PRESENT), (*CUSTOM, "cpu5m")}),
        ("has(metrics.custom) && metrics.custom.size() > 0", {(*CUSTOM, PRESENT), CUSTOM}),
        ("metrics.custom.all(k, metrics.custom[k] < 0.5)", {CUSTOM}),
        ("cel.bind(c, metrics.custom, has(c.cpu5m))", {CUSTOM}),
        ("cel.bind(m, metrics, has(m.custom))", {()}),
        ("[1].exists(x, has(metrics.custom))", {(*CUSTOM, PRESENT)}),
    ],
)
def test_each_form_reads_the_paths_that_decide_it(source: str, selected: set[tuple[str, ...]]) -> None:
    """What the caches key on (tests/test_analysis.py checks these paths are enough to evaluate each form)."""
    assert paths(source) == {"metrics": frozenset(selected)}


@pytest.mark.parametrize(
    ("source", "cost"),
    [
        ("metrics.custom", 2),
        ("has(metrics.custom)", 3),  # the selection, and the test
        ("has(metrics.custom.cpu5m)", 4),
        ("metrics.?custom.?cpu5m", 3),  # an optional selection costs as a selection
        ("metrics.custom[?'cpu5m']", 3),
        ("metrics.custom['cpu5m']", 3),
        ("'cpu5m' in metrics.custom", 3),  # a lookup in a map
        ("cel.bind(c, metrics.custom, has(c.cpu5m))", 5),
        ("metrics.custom.all(k, metrics.custom[k] < 0.5)", 1027),  # 128 entries assumed (docs/rules/cost.md)
    ],
)
def test_each_form_costs_what_its_parts_cost(source: str, cost: int) -> None:
    assert estimate(source).cost == cost


def test_a_presence_test_is_a_path_whose_fields_end_at_the_tested_field() -> None:
    assert paths("has(metrics.custom)") == {"metrics": frozenset({("custom", PRESENT)})}
    assert fields(("custom", PRESENT)) == ("custom",)
    assert fields(("custom", "cpu5m", PRESENT)) == ("custom", "cpu5m")
    assert fields(("custom", "cpu5m")) == ("custom", "cpu5m")
    assert fields(()) == ()


def test_a_key_holding_the_presence_marker_reads_the_map_whole() -> None:
    assert paths("'\x00' in node.metadata.labels") == {"node": frozenset({("metadata", "labels")})}


@pytest.mark.parametrize("guard", GUARDS)
def test_each_guard_loads_and_decides_as_the_reference(tmp_path: Path, engine: Engine, guard: str) -> None:
    book = book_of(tmp_path, engine, guarded_rules([guard], []))
    pod, nodes = make_pod(name="web"), contexts()
    call = Call(pod, nodes, now=NOW)
    fast = evaluate(prepared(book), call)
    assert fast.as_dict() == reference.evaluate(book, call).as_dict()
    passed = [name for name, verdict in fast.nodes.items() if verdict.passed]
    assert passed == (["none", "idle", "busy"] if guard == GUARDS[-1] else ["none", "idle"])


def test_guarded_scores_give_a_node_without_a_value_the_lowest_score(tmp_path: Path, engine: Engine) -> None:
    book = book_of(tmp_path, engine, guarded_rules(["has(metrics.custom)"], SCORES))
    pod, nodes = make_pod(name="web"), contexts()
    call = Call(pod, nodes, now=NOW)
    fast = evaluate(prepared(book), call)
    assert fast.as_dict() == reference.evaluate(book, call).as_dict()
    raw = {name: [round(s.raw or 0.0, 6) for s in verdict.scores] for name, verdict in fast.nodes.items()}
    assert raw == {"none": [0.0, 0.0, 0.0], "idle": [8.0, 8.0, 8.0], "busy": [0.5, 0.5, 0.5]}
    assert not any(s.raw is None or s.error for verdict in fast.nodes.values() for s in verdict.scores)


@pytest.mark.parametrize(
    "typo",
    [
        "!has(metrics.custom) || !has(metrics.custom.cpu5n)",
        "metrics.?custom.?cpu5n.orValue(0.0) < 0.5",
        "metrics.custom[?'cpu5n'].orValue(0.0) < 0.5",
        "metrics.custom['cpu5n'] < 0.5",
        "has(metrics.custom) && 'cpu5n' in metrics.custom",
        "[1].exists(x, has(metrics.custom.cpu5n))",
    ],
)
def test_an_undefined_custom_metric_is_refused_in_every_form(tmp_path: Path, engine: Engine, typo: str) -> None:
    with pytest.raises(RulesLoadFailed) as failure:
        book_of(tmp_path, engine, guarded_rules([typo], []))
    (error,) = failure.value.errors
    assert error.message == "metrics.custom.cpu5n is not defined by any MetricSource (defined: cpu5m)"


@pytest.mark.parametrize("source", ["has(nope)", "has(nope) && has(metrics)", "[1].exists(x, has(x))"])
def test_has_of_a_bare_name_is_refused_saying_what_to_write(engine: Engine, source: str) -> None:
    with pytest.raises(CelCompileError) as failure:
        engine.compile(source)
    name = source.split("has(")[1].split(")")[0]
    assert failure.value.message.startswith(f"has({name}): has() tests whether a map or message has a field")
    assert (failure.value.line, failure.value.column) == (1, source.index(f"has({name})") + 5)


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
def test_check_and_eval_accept_the_guarded_rule(
    tmp_path: Path, engine_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "source.yaml").write_text(SOURCE)
    (rules / "rules.yaml").write_text(guarded_rules([ISSUE_RULE], SCORES[:1]))
    assert main(["check", str(rules), "--cel-engine", engine_name]) == 0
    capsys.readouterr()
    assert main(["eval", ISSUE_RULE, "--cel-engine", engine_name]) == 0
    assert main(["eval", "has(metrics.custom)", "--cel-engine", engine_name]) == 0
    assert capsys.readouterr().out.split() == ["true", "false"]


def test_replay_decides_again_with_the_guarded_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording, _ = record(tmp_path, "names")
    rules = rules_dir(tmp_path / "rules", LIVE)
    (rules / "source.yaml").write_text(SOURCE)
    (rules / "guarded.yaml").write_text(guarded_rules([ISSUE_RULE], SCORES[:1]))
    capsys.readouterr()
    assert main(["replay", str(recording), "--rules", str(rules), "--fail-on", "unschedulable>0"]) == 0
    assert "error" not in capsys.readouterr().err
