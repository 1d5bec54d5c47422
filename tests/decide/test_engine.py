"""The semantics of rule evaluation (docs/rules/language.md), on both CEL engines.

Each test loads a real rule file from tmp_path, evaluates it with real CEL and checks the Decision.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from rulesched.decide.decision import Decision, FilterResult, NodeDecision, RuleError, ScoreResult
from rulesched.decide.verbs import Verb
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import ENGINE_NAMES, Engine, make_engine
from rulesched.rules.context import NodeUsage
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.rules.pod_values import pod_requests
from tests.builders import (
    decide,
    load_spec,
    make_container,
    make_context,
    make_node,
    make_pod,
    make_usage,
    rule_set,
    write_rules,
)

REPO = Path(__file__).resolve().parents[2]


def passes(book: RuleBook, node: dict[str, Any], usage: NodeUsage | None = None, **pod: Any) -> bool:
    """Whether `node` passes the book's filters for a pod built from `pod`."""
    decision = decide(book, make_pod(**pod), [make_context(node, usage)])
    return decision.nodes[node["metadata"]["name"]].passed


def scores(book: RuleBook, nodes: list[dict[str, Any]], usages: dict[str, NodeUsage] | None = None) -> dict[str, Any]:
    contexts = [make_context(n, (usages or {}).get(n["metadata"]["name"])) for n in nodes]
    decision = decide(book, make_pod(), contexts)
    return {name: node.score for name, node in decision.nodes.items()}


def cpu_nodes(*cores: str) -> list[dict[str, Any]]:
    """Nodes n0, n1, … with the given allocatable CPU; scores below read `allocatable.cpu`."""
    return [make_node(f"n{i}", allocatable={"cpu": c}) for i, c in enumerate(cores)]


# --- matchConditions ---------------------------------------------------------------------------

CONDITIONS = """
matchConditions:
- name: not-system
  expression: pod.metadata.namespace != 'kube-system'
- name: labelled-web
  expression: "has(pod.metadata.labels) && pod.metadata.labels['app'] == 'web'"
filters:
- name: never
  expression: "false"
"""


@pytest.mark.parametrize(
    ("namespace", "labels", "applies"),
    [
        ("default", {"app": "web"}, True),
        ("kube-system", {"app": "web"}, False),
        ("default", {"app": "db"}, False),
        ("default", None, False),
    ],
)
def test_rule_set_applies_only_when_all_match_conditions_are_true(
    tmp_path: Path, engine: Engine, namespace: str, labels: dict[str, str] | None, applies: bool
) -> None:
    book = load_spec(tmp_path, engine, CONDITIONS)
    decision = decide(book, make_pod(namespace=namespace, labels=labels), [make_context(make_node())])
    assert decision.applied == (["test"] if applies else [])
    assert decision.nodes["node-a"].passed is not applies
    assert decision.errors == []


def test_no_rule_set_applies_every_node_passes_and_scores_zero(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(
        tmp_path,
        engine,
        """
        matchConditions:
        - name: never
          expression: "false"
        filters:
        - name: reject-all
          expression: "false"
        scores:
        - name: ten
          expression: "10"
          normalize: Clamp
        """,
    )
    decision = decide(book, make_pod(), [make_context(make_node("a")), make_context(make_node("b"))])
    assert decision.applied == []
    assert [(n.name, n.passed, n.score, n.filters, n.scores) for n in decision.nodes.values()] == [
        ("a", True, 0, [], []),
        ("b", True, 0, [], []),
    ]


def test_match_condition_that_fails_applies_the_rule_set_and_records_the_error(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(
        tmp_path,
        engine,
        """
        matchConditions:
        - name: team-a
          expression: pod.metadata.labels['team'] == 'a'
        filters:
        - name: reject-all
          expression: "false"
          message: rejected
        """,
    )
    decision = decide(book, make_pod(labels={}), [make_context(make_node())])
    assert decision.applied == ["test"]
    assert decision.nodes["node-a"].reason == "rejected (rule test/reject-all)"
    assert [(e.rule_set, e.rule, e.node) for e in decision.errors] == [("test", "team-a", None)]
    assert decision.errors[0].error  # the engine's own words, which differ between engines


def test_false_match_condition_wins_over_one_that_fails(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(
        tmp_path,
        engine,
        """
        matchConditions:
        - name: team-a
          expression: pod.metadata.labels['team'] == 'a'
        - name: not-default
          expression: pod.metadata.namespace != 'default'
        filters:
        - name: reject-all
          expression: "false"
        """,
    )
    decision = decide(book, make_pod(labels={}, namespace="default"), [make_context(make_node())])
    assert decision.applied == []
    assert decision.nodes["node-a"].passed
    assert decision.errors == []  # as in Kubernetes, an error that decides nothing is not reported


def test_match_condition_reads_now(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(
        tmp_path,
        engine,
        """
        matchConditions:
        - name: after-launch
          expression: now >= timestamp('2026-11-22T01:00:00Z')
        - name: before-end
          expression: now < timestamp('2026-11-22T01:00:01Z')
        filters:
        - name: reject-all
          expression: "false"
        """,
    )
    assert decide(book, make_pod(), [make_context(make_node())]).applied == ["test"]


# --- variables ---------------------------------------------------------------------------------

VARIABLES = """
variables:
- name: cores
  expression: allocatable.cpu
- name: doubled
  expression: variables.cores * 2.0
- name: label
  expression: "has(node.metadata.labels) && 'tier' in node.metadata.labels ? node.metadata.labels['tier'] : 'none'"
filters:
- name: tiered
  expression: variables.label != 'none'
  message: no tier
scores:
- name: twice-the-cores
  expression: variables.doubled
  normalize: Clamp
"""


def test_variables_read_earlier_ones_and_are_computed_per_node(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, VARIABLES)
    nodes = [
        make_node("small", labels={"tier": "a"}, allocatable={"cpu": "1500m"}),
        make_node("big", labels={"tier": "b"}, allocatable={"cpu": "4"}),
        make_node("untiered", allocatable={"cpu": "4"}),
    ]
    decision = decide(book, make_pod(), [make_context(n) for n in nodes])
    assert [(n.name, n.passed, [s.raw for s in n.scores], n.score) for n in decision.nodes.values()] == [
        ("small", True, [3.0], 3),
        ("big", True, [8.0], 8),
        ("untiered", False, [], None),
    ]


def test_rule_reading_a_variable_that_fails_fails_with_it(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(
        tmp_path,
        engine,
        """
        variables:
        - name: zone
          expression: node.metadata.labels['zone']
        filters:
        - name: zone-a
          expression: variables.zone == 'a'
        """,
    )
    decision = decide(book, make_pod(), [make_context(make_node("bare")), make_context(make_node("a", {"zone": "a"}))])
    assert (decision.nodes["bare"].passed, decision.nodes["a"].passed) == (False, True)
    assert decision.nodes["bare"].reason == "rule test/zone-a could not be evaluated"


def test_variable_is_evaluated_only_when_read(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(
        tmp_path,
        engine,
        """
        variables:
        - name: cpuUsed
          expression: metrics.cpu.usage
        scores:
        - name: idle
          expression: "has(metrics.cpu) ? 1.0 - variables.cpuUsed : 0.0"
          normalize: Clamp
        """,
    )
    decision = decide(book, make_pod(), [make_context(make_node("no-metrics"))])
    assert decision.errors == []
    assert decision.nodes["no-metrics"].scores[0].raw == 0.0


# --- filters -----------------------------------------------------------------------------------

LABEL_FILTER = """
filters:
- name: require-xy-label
  expression: "has(node.metadata.labels) && 'filter.xy.com' in node.metadata.labels"
  message: missing label filter.xy.com
"""


@pytest.mark.parametrize(
    ("labels", "passed"),
    [
        ({"filter.xy.com": "true"}, True),
        ({"filter.xy.com": ""}, True),
        ({"other": "true"}, False),
        ({}, False),
        (None, False),
    ],
)
def test_filter_passes_only_nodes_with_label(
    tmp_path: Path, engine: Engine, labels: dict[str, str] | None, passed: bool
) -> None:
    book = load_spec(tmp_path, engine, LABEL_FILTER)
    assert passes(book, make_node(labels=labels)) is passed


def test_filter_rejects_node_without_label_naming_the_rule(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, LABEL_FILTER, name="xy-least-cpu")
    decision = decide(book, make_pod(), [make_context(make_node("bare"))])
    node = decision.nodes["bare"]
    assert (node.passed, node.reason, node.resolvable) == (
        False,
        "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)",
        False,
    )
    assert node.filters == [
        FilterResult("xy-least-cpu", "require-xy-label", "fail", True, "missing label filter.xy.com")
    ]
    assert node.as_dict()["resolvableByPreemption"] is False


def test_filter_without_message_gets_a_default_one(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, "filters:\n- name: never\n  expression: 'false'")
    decision = decide(book, make_pod(), [make_context(make_node())])
    assert decision.nodes["node-a"].reason == "failed never (rule test/never)"


def test_reasons_carry_no_per_node_values(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, LABEL_FILTER)
    nodes = [make_node(f"node-{i}", labels={"n": str(i)}, allocatable={"cpu": str(i + 1)}) for i in range(3)]
    decision = decide(book, make_pod(), [make_context(n, make_usage(cpu=0.1 * i)) for i, n in enumerate(nodes)])
    assert {n.reason for n in decision.nodes.values()} == {"missing label filter.xy.com (rule test/require-xy-label)"}


def test_first_failing_filter_by_rule_set_name_then_file_order_gives_the_reason(tmp_path: Path, engine: Engine) -> None:
    failing = "filters:\n- name: {0}-first\n  expression: 'false'\n- name: {0}-second\n  expression: 'false'"
    write_rules(tmp_path, rule_set("zeta", failing.format("z")), name="a.yaml")
    write_rules(tmp_path, rule_set("alpha", failing.format("a")), name="b.yaml")
    book = load_rule_book([tmp_path], engine)
    node = decide(book, make_pod(), [make_context(make_node())]).nodes["node-a"]
    assert node.reason == "failed a-first (rule alpha/a-first)"
    assert [(f.rule_set, f.rule, f.outcome) for f in node.filters] == [
        ("alpha", "a-first", "fail"),
        ("alpha", "a-second", "fail"),
        ("zeta", "z-first", "fail"),
        ("zeta", "z-second", "fail"),
    ]


@pytest.mark.parametrize(
    ("first_resolvable", "second_resolvable", "reason", "resolvable"),
    [
        (True, False, "second (rule test/second)", False),
        (False, True, "first (rule test/first)", False),
        (True, True, "first (rule test/first)", True),
        (False, False, "first (rule test/first)", False),
    ],
)
def test_unresolvable_failure_wins_over_resolvable_one(
    tmp_path: Path, engine: Engine, first_resolvable: bool, second_resolvable: bool, reason: str, resolvable: bool
) -> None:
    book = load_spec(
        tmp_path,
        engine,
        f"""
        filters:
        - name: first
          expression: "false"
          message: first
          resolvableByPreemption: {str(first_resolvable).lower()}
        - name: second
          expression: "false"
          message: second
          resolvableByPreemption: {str(second_resolvable).lower()}
        """,
    )
    node = decide(book, make_pod(), [make_context(make_node())]).nodes["node-a"]
    assert (node.passed, node.reason, node.resolvable) == (False, reason, resolvable)
    assert node.as_dict()["resolvableByPreemption"] is resolvable


ZONE_LOOKUP = """
filters:
- name: zone-a
  expression: node.metadata.labels['zone'] == 'a'
  message: not in zone a
  failurePolicy: {policy}
"""


def test_filter_error_with_failure_policy_fail_rejects_without_values(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, ZONE_LOOKUP.format(policy="Fail"))
    decision = decide(book, make_pod(), [make_context(make_node("bare"))])
    node = decision.nodes["bare"]
    assert (node.passed, node.reason) == (False, "rule test/zone-a could not be evaluated")
    assert [(f.outcome, f.message) for f in node.filters] == [("error", None)]
    assert [(e.rule_set, e.rule, e.node) for e in decision.errors] == [("test", "zone-a", "bare")]


def test_filter_error_with_failure_policy_ignore_passes(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, ZONE_LOOKUP.format(policy="Ignore"))
    decision = decide(
        book, make_pod(), [make_context(make_node("bare")), make_context(make_node("b", labels={"zone": "b"}))]
    )
    assert (decision.nodes["bare"].passed, decision.nodes["bare"].reason) == (True, None)
    assert decision.nodes["bare"].filters[0].outcome == "error"
    assert decision.nodes["b"].reason == "not in zone a (rule test/zone-a)"
    assert [(e.rule, e.node) for e in decision.errors] == [("zone-a", "bare")]


@pytest.mark.parametrize(("policy", "passed"), [("Fail", False), ("Ignore", True)])
def test_filter_returning_a_non_bool_at_run_time_is_an_error(
    tmp_path: Path, engine: Engine, policy: str, passed: bool
) -> None:
    book = load_spec(
        tmp_path,
        engine,
        f"filters:\n- name: dyn\n  expression: dyn(node.metadata.labels['zone'])\n  failurePolicy: {policy}",
    )
    decision = decide(book, make_pod(), [make_context(make_node(labels={"zone": "a"}))])
    assert decision.nodes["node-a"].passed is passed
    assert decision.nodes["node-a"].filters[0].outcome == "error"
    assert [(e.rule, e.node) for e in decision.errors] == [("dyn", "node-a")]
    assert "not bool" in decision.errors[0].error


@pytest.mark.parametrize(
    ("message_expression", "labels", "reason"),
    [
        ("'node ' + node.metadata.name + ' lacks label'", None, "node bare lacks label (rule test/f)"),
        ("node.metadata.labels['team'] + ' only'", {"team": "x"}, "x only (rule test/f)"),
        ("node.metadata.labels['team'] + ' only'", None, "static message (rule test/f)"),
        ("''", None, "static message (rule test/f)"),
        ("'   '", None, "static message (rule test/f)"),
        ("'two\\nlines'", None, "static message (rule test/f)"),
    ],
)
def test_message_expression_is_used_and_falls_back_to_message(
    tmp_path: Path, engine: Engine, message_expression: str, labels: dict[str, str] | None, reason: str
) -> None:
    spec = (
        "filters:\n- name: f\n  expression: 'false'\n  message: static message\n"
        f"  messageExpression: {message_expression!r}"
    )
    book = load_spec(tmp_path, engine, spec)
    decision = decide(book, make_pod(), [make_context(make_node("bare", labels=labels))])
    assert decision.nodes["bare"].reason == reason
    assert decision.errors == []


def test_audit_filter_is_reported_but_never_rejects(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(
        tmp_path,
        engine,
        """
        filters:
        - name: watch-only
          expression: "false"
          message: would reject
          mode: Audit
        - name: broken-audit
          expression: node.metadata.labels['x'] == 'y'
          mode: Audit
        """,
    )
    decision = decide(book, make_pod(), [make_context(make_node())])
    node = decision.nodes["node-a"]
    assert (node.passed, node.reason) == (True, None)
    assert [(f.rule, f.outcome, f.enforce, f.message) for f in node.filters] == [
        ("watch-only", "fail", False, "would reject"),
        ("broken-audit", "error", False, None),
    ]
    assert [f.rule for f in decision.audit_rejections()] == ["watch-only", "broken-audit"]
    assert node.as_dict()["filters"][0]["mode"] == "Audit"


# --- scores ------------------------------------------------------------------------------------


def score_spec(*rules: str) -> str:
    return "scores:\n" + "\n".join(rules)


def score_rule(name: str, expression: str, normalize: str = "MinMax", weight: float = 1, mode: str = "Enforce") -> str:
    return f"- name: {name}\n  expression: {expression!r}\n  normalize: {normalize}\n  weight: {weight}\n  mode: {mode}"


@pytest.mark.parametrize(
    ("cores", "expected"),
    [
        (("1", "2", "3"), {"n0": 0, "n1": 5, "n2": 10}),
        (("1", "1.5", "5"), {"n0": 0, "n1": 1, "n2": 10}),
        (("4", "4", "4"), {"n0": 10, "n1": 10, "n2": 10}),
        (("7",), {"n0": 10}),
    ],
)
def test_minmax_maps_the_candidates_range_to_0_10(
    tmp_path: Path, engine: Engine, cores: tuple[str, ...], expected: dict[str, int]
) -> None:
    book = load_spec(tmp_path, engine, score_spec(score_rule("cores", "allocatable.cpu")))
    assert scores(book, cpu_nodes(*cores)) == expected


def test_minmax_gives_zero_to_a_node_whose_rule_fails_and_records_the_error(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, score_spec(score_rule("least-cpu", "-metrics.cpu.usage")))
    nodes = cpu_nodes("2", "2", "2", "2")
    usages = {"n0": make_usage(cpu=0.5), "n1": make_usage(cpu=0.25), "n3": make_usage(cpu=1.0)}
    decision = decide(book, make_pod(), [make_context(n, usages.get(n["metadata"]["name"])) for n in nodes])
    assert {n.name: n.score for n in decision.nodes.values()} == {"n0": 7, "n1": 10, "n2": 0, "n3": 0}
    unknown = decision.nodes["n2"].scores[0]
    assert (unknown.raw, unknown.normalized) == (None, 0.0)
    assert unknown.error is not None
    assert [(e.rule_set, e.rule, e.node) for e in decision.errors] == [("test", "least-cpu", "n2")]


@pytest.mark.parametrize(
    ("expression", "raw", "normalized", "score"),
    [
        ("-5.0", -5.0, 0.0, 0),
        ("15.0", 15.0, 10.0, 10),
        ("7.5", 7.5, 7.5, 8),
        ("4.5", 4.5, 4.5, 5),
        ("4.49", 4.49, 4.49, 4),
        ("0.5", 0.5, 0.5, 1),
        ("3", 3, 3.0, 3),
        ("-1", -1, 0.0, 0),
        ("uint(6)", 6, 6.0, 6),
        ("11", 11, 10.0, 10),
    ],
)
def test_clamp_uses_the_value_clamped_to_0_10_and_rounds_half_up(
    tmp_path: Path, engine: Engine, expression: str, raw: float, normalized: float, score: int
) -> None:
    book = load_spec(tmp_path, engine, score_spec(score_rule("fixed", expression, "Clamp")))
    node = decide(book, make_pod(), [make_context(make_node())]).nodes["node-a"]
    assert (node.scores[0].raw, node.scores[0].normalized, node.score) == (raw, normalized, score)
    assert type(node.score) is int


@pytest.mark.parametrize(
    ("first", "second", "score"),
    [
        ((10, 3), (0, 1), 8),  # 30 / 4 = 7.5 → 8
        ((10, 1), (0, 3), 3),  # 10 / 4 = 2.5 → 3
        ((4, 1), (5, 1), 5),  # 4.5 → 5
        ((4, 0.1), (5, 0.1), 5),  # 4.5 in floating point
        ((9, 0.5), (0, 2), 2),  # 4.5 / 2.5 = 1.8 → 2
        ((10, 1), (10, 1), 10),
    ],
)
def test_node_score_is_the_weighted_mean_rounded(
    tmp_path: Path, engine: Engine, first: tuple[float, float], second: tuple[float, float], score: int
) -> None:
    spec = score_spec(
        score_rule("a", f"{first[0]}.0", "Clamp", first[1]), score_rule("b", f"{second[0]}.0", "Clamp", second[1])
    )
    book = load_spec(tmp_path, engine, spec)
    assert scores(book, [make_node()]) == {"node-a": score}


def test_score_may_be_int_or_double(tmp_path: Path, engine: Engine) -> None:
    spec = score_spec(
        score_rule("as-int", "allocatable.cpu > 1.0 ? 10 : 0", "Clamp"),
        score_rule("as-double", "allocatable.cpu", "MinMax"),
    )
    book = load_spec(tmp_path, engine, spec)
    decision = decide(book, make_pod(), [make_context(n) for n in cpu_nodes("1", "2")])
    assert [[(s.raw, s.normalized) for s in n.scores] for n in decision.nodes.values()] == [
        [(0, 0.0), (1.0, 0.0)],
        [(10, 10.0), (2.0, 10.0)],
    ]
    assert {n.name: n.score for n in decision.nodes.values()} == {"n0": 0, "n1": 10}


def test_audit_score_is_reported_but_not_counted(tmp_path: Path, engine: Engine) -> None:
    spec = score_spec(
        score_rule("counted", "2.0", "Clamp"),
        score_rule("watched", "10.0", "Clamp", weight=5, mode="Audit"),
    )
    book = load_spec(tmp_path, engine, spec)
    node = decide(book, make_pod(), [make_context(make_node())]).nodes["node-a"]
    assert node.score == 2
    assert node.scores == [
        ScoreResult("test", "counted", True, 1.0, 2.0, 2.0),
        ScoreResult("test", "watched", False, 5.0, 10.0, 10.0),
    ]


def test_only_audit_scores_give_zero(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, score_spec(score_rule("watched", "10.0", "Clamp", mode="Audit")))
    assert scores(book, [make_node()]) == {"node-a": 0}


def test_scores_are_computed_over_passing_nodes_only(tmp_path: Path, engine: Engine) -> None:
    spec = "filters:\n- name: small\n  expression: allocatable.cpu < 8.0\n" + score_spec(
        score_rule("cores", "allocatable.cpu")
    )
    book = load_spec(tmp_path, engine, spec)
    nodes = cpu_nodes("2", "4", "16")
    decision = decide(book, make_pod(), [make_context(n) for n in nodes])
    assert {n.name: n.score for n in decision.nodes.values()} == {"n0": 0, "n1": 10, "n2": None}
    assert decision.nodes["n2"].scores == []
    assert [(n.name, n.score) for n in decision.ranking()] == [("n1", 10), ("n0", 0)]
    unfiltered = decide(book, make_pod(), [make_context(n) for n in nodes], Verb.PRIORITIZE)
    assert {n.name: n.score for n in unfiltered.nodes.values()} == {"n0": 0, "n1": 1, "n2": 10}


def test_score_errors_from_wrong_runtime_type_are_recorded(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, score_spec(score_rule("label", "dyn(node.metadata.labels['weight'])", "Clamp")))
    decision = decide(book, make_pod(), [make_context(make_node(labels={"weight": "heavy"}))])
    assert decision.nodes["node-a"].score == 0
    assert [(e.rule, e.node) for e in decision.errors] == [("label", "node-a")]
    assert "not a number" in decision.errors[0].error


def test_extreme_scores_still_give_an_integer_0_10(tmp_path: Path, engine: Engine) -> None:
    spec = score_spec(score_rule("huge", "allocatable.cpu > 1.0 ? 1.0e308 : -1.0e308"))
    book = load_spec(tmp_path, engine, spec)
    assert scores(book, cpu_nodes("1", "2")) == {"n0": 0, "n1": 10}


# --- what an expression sees -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "allocatable", "expression"),
    [
        (None, None, "!has(metrics.cpu) && !has(metrics.memory) && !has(metrics.age)"),
        (make_usage(cpu=0.5), None, "has(metrics.cpu) && !has(metrics.memory) && !has(metrics.age)"),
        (make_usage(cpu=0.5), None, "metrics.cpu.usage == 0.5 && metrics.cpu.utilization == 0.25"),
        (make_usage(memory=2**30), None, "metrics.memory.usage == 1073741824.0 && metrics.memory.utilization == 0.25"),
        (make_usage(cpu=0.5, age=30), None, "metrics.age == 30.0"),
        (make_usage(cpu=0.5), {"memory": "1Gi"}, "has(metrics.cpu) && !has(metrics.cpu.utilization)"),
        (None, {"cpu": "250m"}, "allocatable.cpu == 0.25"),
        (None, {"memory": "1Gi"}, "allocatable.memory == 1073741824.0"),
        (None, {"memory": "4008772Ki"}, "allocatable.memory == 4104982528.0"),
        (
            None,
            {"pods": "110", "nvidia.com/gpu": "2"},
            "allocatable.pods == 110.0 && allocatable['nvidia.com/gpu'] == 2.0",
        ),
        (None, {"cpu": "2"}, "!('memory' in allocatable)"),
        (None, None, "node.metadata.name == 'node-a' && node.metadata.resourceVersion == '1'"),
        (None, None, "pod.metadata.name == 'web-0' && pod.metadata.namespace == 'default'"),
        (None, None, "now == timestamp('2026-11-22T01:00:00Z')"),
        (None, None, "now.getFullYear() == 2026"),
        (None, None, "quantity('1500m') == quantity('1.5')"),
        (make_usage(cpu=0.5), None, "metrics.cpu.usage + requests.cpu < allocatable.cpu * 0.8"),
    ],
)
def test_expression_sees_the_context_as_designed(
    tmp_path: Path, engine: Engine, usage: NodeUsage | None, allocatable: dict[str, str] | None, expression: str
) -> None:
    book = load_spec(tmp_path, engine, f"filters:\n- name: sees\n  expression: {expression!r}")
    node = make_node(allocatable=allocatable or {"cpu": "2", "memory": "4Gi"})
    decision = decide(book, make_pod(requests={"cpu": "500m"}), [make_context(node, usage)])
    assert decision.errors == []
    assert decision.nodes["node-a"].passed


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod(), {}),
        (make_pod(requests={"cpu": "250m", "memory": "1Gi"}), {"cpu": 0.25, "memory": 1073741824.0}),
        (make_pod(requests=[{"cpu": "100m"}, {"cpu": "200m"}]), {"cpu": 0.3}),
        (make_pod(requests={"cpu": 2, "nvidia.com/gpu": "1"}), {"cpu": 2.0, "nvidia.com/gpu": 1.0}),
        (make_pod(requests={"cpu": "100m"}, init_containers=[make_container("init", {"cpu": "500m"})]), {"cpu": 0.5}),
        (
            make_pod(requests={"cpu": "1", "memory": "1Gi"}, init_containers=[make_container("init", {"cpu": "500m"})]),
            {"cpu": 1.0, "memory": 1073741824.0},
        ),
        (
            make_pod(requests={"cpu": "100m"}, init_containers=[make_container("sidecar", {"cpu": "50m"}, "Always")]),
            {"cpu": 0.15},
        ),
        (
            make_pod(
                requests={"cpu": "100m"},
                init_containers=[
                    make_container("sidecar", {"cpu": "50m"}, "Always"),
                    make_container("init", {"cpu": "500m"}),
                ],
            ),
            {"cpu": 0.55},
        ),
        (
            make_pod(
                requests={"cpu": "1"},
                init_containers=[
                    make_container("init", {"cpu": "3"}),
                    make_container("sidecar", {"cpu": "1"}, "Always"),
                ],
            ),
            {"cpu": 3.0},
        ),
        (
            make_pod(
                requests={"cpu": "1"},
                init_containers=[
                    make_container("first-sidecar", {"cpu": "1"}, "Always"),
                    make_container("init", {"cpu": "2"}),
                    make_container("second-sidecar", {"cpu": "1"}, "Always"),
                ],
            ),
            {"cpu": 3.0},
        ),
        (
            make_pod(requests={"cpu": "1"}, overhead={"cpu": "250m", "memory": "120Mi"}),
            {"cpu": 1.25, "memory": 125829120.0},
        ),
        (
            make_pod(
                requests={"cpu": "100m"},
                init_containers=[make_container("init", {"cpu": "1"})],
                overhead={"cpu": "100m"},
            ),
            {"cpu": 1.1},
        ),
        (make_pod(requests={"cpu": "lots", "memory": "1Ki"}), {"memory": 1024.0}),
    ],
    ids=[
        "no-requests",
        "quantities",
        "containers-summed",
        "json-number",
        "init-container-max",
        "init-container-smaller",
        "sidecar-added",
        "init-after-sidecar",
        "init-before-sidecar",
        "sidecars-around-init",
        "overhead",
        "init-then-overhead",
        "invalid-quantity-skipped",
    ],
)
def test_requests_are_computed_as_kube_scheduler_does(
    tmp_path: Path, engine: Engine, pod: dict[str, Any], expected: dict[str, float]
) -> None:
    assert pod_requests(pod) == expected
    checks = [f"requests[{name!r}] == {value!r}" for name, value in expected.items()]
    expression = " && ".join([f"requests.size() == {len(expected)}", *checks])
    book = load_spec(tmp_path, engine, f"filters:\n- name: requests\n  expression: {expression!r}")
    decision = decide(book, pod, [make_context(make_node())])
    assert decision.errors == []
    assert decision.nodes["node-a"].passed


# Kubernetes CEL functions (docs/rules/language.md) and cel-go's string extensions, on both engines.
LIBRARY: list[str] = [
    "quantity('1Gi').isGreaterThan(quantity('1G'))",
    "quantity('1500m').asApproximateFloat() == 1.5",
    "quantity('1').add(quantity('500m')) == quantity('1.5')",
    "quantity('2').sub(1).compareTo(quantity('1')) == 0",
    "quantity(node.status.allocatable.memory).isLessThan(quantity('5Gi'))",
    "isQuantity('250m') && !isQuantity('1x')",
    "node.metadata.name.find('[a-z]+') == 'node'",
    "node.metadata.name.matches('^node-[a-z]$')",
    "'ABC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC'",
    "node.metadata.name.split('-') == ['node', 'a']",
    "node.metadata.name.indexOf('-') == 4 && 'a-b-c'.lastIndexOf('-') == 3",
    "' a '.trim() == 'a'",
    "'a.b'.replace('.', '-') == 'a-b' && ['a', 'b'].join('/') == 'a/b'",
    "string(2.0) == '2' && string(2.5) == '2.5' && string(3) == '3'",
]


@pytest.mark.parametrize("expression", LIBRARY)
def test_kubernetes_cel_functions_work_on_both_engines(tmp_path: Path, engine: Engine, expression: str) -> None:
    book = load_spec(tmp_path, engine, f"filters:\n- name: library\n  expression: {expression!r}")
    decision = decide(book, make_pod(), [make_context(make_node(allocatable={"memory": "4Gi"}))])
    assert decision.errors == []
    assert decision.nodes["node-a"].passed


def test_cel_bind_works_on_both_engines(tmp_path: Path, engine: Engine) -> None:
    spec = "filters:\n- name: bind\n  expression: \"cel.bind(n, node.metadata.name, n + n) == 'node-anode-a'\""
    decision = decide(load_spec(tmp_path, engine, spec), make_pod(), [make_context(make_node())])
    assert decision.nodes["node-a"].passed


def test_a_function_only_cpp_has_is_a_load_error_on_both_engines(tmp_path: Path, engine: Engine) -> None:
    spec = 'filters:\n- name: math\n  expression: "math.greatest(1, 2) == 2"'
    with pytest.raises(RulesLoadFailed) as failure:
        load_spec(tmp_path, engine, spec)
    assert "math.greatest: not available on the celpy engine" in str(failure.value)


# --- the founding example ----------------------------------------------------------------------


def founding_example(engine: Engine, tmp_path: Path) -> RuleBook:
    shutil.copy(REPO / "rules" / "xy-least-cpu.yaml", tmp_path / "xy-least-cpu.yaml")
    return load_rule_book([tmp_path], engine)


FOUNDING_NODES = [
    (make_node("k8s-master"), make_usage(cpu=0.264)),
    (make_node("k8s-node1", labels={"filter.xy.com": "true"}), make_usage(cpu=0.087)),
    (make_node("k8s-node2", labels={"filter.xy.com": "true"}), make_usage(cpu=0.067)),
]


def test_founding_example_rejects_the_unlabelled_master_and_prefers_the_idlest_node(
    tmp_path: Path, engine: Engine
) -> None:
    book = founding_example(engine, tmp_path)
    decision = decide(book, make_pod(), [make_context(n, u) for n, u in FOUNDING_NODES])
    assert [(n.name, n.passed, n.reason, n.score) for n in decision.nodes.values()] == [
        ("k8s-master", False, "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)", None),
        ("k8s-node1", True, None, 0),
        ("k8s-node2", True, None, 10),
    ]
    assert decision.errors == []
    assert decision.as_dict()["ranking"] == [{"name": "k8s-node2", "score": 10}, {"name": "k8s-node1", "score": 0}]


def test_founding_example_leaves_system_pods_alone(tmp_path: Path, engine: Engine) -> None:
    book = founding_example(engine, tmp_path)
    decision = decide(book, make_pod(namespace="kube-system"), [make_context(n, u) for n, u in FOUNDING_NODES])
    assert decision.applied == []
    assert [(n.passed, n.score) for n in decision.nodes.values()] == [(True, 0)] * 3


def test_founding_example_node_without_metrics_scores_zero(tmp_path: Path, engine: Engine) -> None:
    book = founding_example(engine, tmp_path)
    labelled = {"filter.xy.com": "true"}
    nodes = [(make_node("fresh", labels=labelled), None), *FOUNDING_NODES[1:]]
    decision = decide(book, make_pod(), [make_context(n, u) for n, u in nodes])
    assert {n.name: n.score for n in decision.nodes.values()} == {"fresh": 0, "k8s-node1": 0, "k8s-node2": 10}
    assert [(e.rule_set, e.rule, e.node) for e in decision.errors] == [("xy-least-cpu", "least-cpu", "fresh")]


def test_decision_as_dict_is_the_same_on_both_engines(tmp_path: Path) -> None:
    results: list[dict[str, Any]] = []
    for name in ENGINE_NAMES:
        book = founding_example(make_engine(name), tmp_path)
        decision: Decision = decide(book, make_pod(), [make_context(n, u) for n, u in FOUNDING_NODES])
        results.append(decision.as_dict())
    assert results[0] == results[1]


def test_rule_errors_are_data(tmp_path: Path, engine: Engine) -> None:
    book = load_spec(tmp_path, engine, ZONE_LOOKUP.format(policy="Ignore"))
    decision = decide(book, make_pod(), [make_context(make_node("bare"))])
    (error,) = decision.errors
    assert isinstance(error, RuleError)
    assert decision.as_dict()["errors"] == [{"ruleSet": "test", "rule": "zone-a", "node": "bare", "error": error.error}]


@pytest.mark.parametrize("seed", range(20))
def test_top_is_the_head_of_the_ranking(seed: int) -> None:
    """The decision log's top nodes are `ranking()`'s first ones, ties by name, whatever the scores."""
    rng = random.Random(seed)
    nodes = {}
    for index in rng.sample(range(1000), rng.randint(0, 40)):
        name = f"node-{index}"
        score = rng.choice([None, *range(0, 11, rng.choice([1, 5, 10]))])
        nodes[name] = NodeDecision(name, passed=rng.random() < 0.8, score=score)
    decision = Decision(generation=1, applied=[], nodes=nodes)
    for count in (3, 1, 5, 2, 50, 1):  # asked in any order (the longest found is kept for shorter ones)
        assert decision.top(count) == [(n.name, n.score) for n in decision.ranking()[:count]]
    decision.scores()  # a prioritize call's scores, counted once: the ranking reads them, with the same result
    for count in (1, 3, 5):
        assert decision.top(count) == [(n.name, n.score) for n in decision.ranking()[:count]]
    prioritized = Decision(generation=1, applied=[])  # every candidate passed and scored: top reads the scores
    scored = [NodeDecision(name, score=n.score or 0) for name, n in nodes.items()]
    prioritized.set_verdicts(list(nodes), scored, filtered=False)
    for count in (3, 1, 5, 50, 2):
        assert prioritized.top(count) == [(n.name, n.score) for n in prioritized.ranking()[:count]]
