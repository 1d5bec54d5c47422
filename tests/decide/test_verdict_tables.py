"""The plan's verdict tables and what the extender builds from a Decision: bounded, moved with their node,
scored exactly as the reference evaluation, and evaluated on the event loop only within its budget."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.responses import Response

from rulesched.decide import reference
from rulesched.decide.decision import Decision, NodeDecision, RuleError
from rulesched.decide.fast import evaluate, prepared, warm
from rulesched.decide.fast.budget import NeedsEvaluationError, within
from rulesched.decide.fast.outcomes import Kind, Made, PositionedError
from rulesched.decide.fast.tables import Verdicts
from rulesched.decide.verbs import Call, Verb
from rulesched.extender import wire
from rulesched.extender.responses import JsonResponse
from rulesched.extender.wire import host_priority_list
from rulesched.rules.cel import make_engine
from rulesched.rules.context import NodeContext
from tests.builders import NOW, load_spec, make_context, make_node, make_pod


def test_the_failed_filters_of_verdicts_no_node_has_any_more_are_forgotten() -> None:
    table = Verdicts()
    node = make_context(make_node("node-a"))
    for round_ in range(500):  # the node fails a new way each time (a rule error names it, say)
        verdict = NodeDecision("", passed=False, reason=f"reason {round_}")
        table.move(node, node, False)
        table.put_all([node], [verdict], [Kind(0, Made(verdict, (), frozenset({("rs", f"rule-{round_}", True)})))])
        assert len(table.failed) <= 2 * len(table) + 65
    assert table[node].reason == "reason 499"


def test_a_replaced_node_context_takes_its_verdict_and_errors_along_only_when_they_hold() -> None:
    table = Verdicts()
    old, new, newer = (make_context(make_node("node-a", labels={"v": str(v)})) for v in range(3))
    verdict = NodeDecision("", passed=False, reason="no")
    errors = (PositionedError(0, RuleError("rs", "rule", "node-a", "boom")),)
    table.put_all([old], [verdict], [Kind(0, Made(verdict, errors, frozenset()))])
    table.move(old, new, True)
    assert (old in table, table[new], table.errors) == (False, verdict, {new: errors})
    table.move(new, newer, False)
    assert (dict(table), table.errors) == ({}, {})


INFINITE_SPEC = """
scores:
- name: odd
  expression: >-
    node.metadata.name == 'node-0' ? 1.0 / 0.0
    : (node.metadata.name == 'node-1' ? double(node.metadata.labels['missing'])
    : double(size(node.metadata.name)) * (node.metadata.name == 'node-2' ? -1.0 : 1.0))
"""


@pytest.mark.parametrize(
    "names", [["node-0", "node-1", "node-2", "node-33"], ["node-0", "node-1"], ["node-1", "node-33"], ["node-1"]]
)
def test_prioritize_ranges_over_infinite_values_and_nodes_without_one_are_the_reference_s(
    tmp_path: Path, names: list[str]
) -> None:
    book = load_spec(tmp_path, make_engine("cpp"), INFINITE_SPEC)
    nodes = [make_context(make_node(name)) for name in names]
    pod = make_pod("web")
    call = Call(pod, nodes, Verb.PRIORITIZE, NOW)
    expected = reference.evaluate(book, call)
    for _ in range(2):  # computed, then from the tables
        assert evaluate(prepared(book), call) == expected


LOOP_SPEC = """
matchConditions:
- name: not-system
  expression: pod.metadata.namespace != 'kube-system'
filters:
- name: named
  expression: node.metadata.name != ''
- name: same-app
  expression: "!('app' in pod.metadata.labels) || node.metadata.name != pod.metadata.labels['app']"
scores:
- name: name-length
  expression: double(size(node.metadata.name))
"""


@pytest.mark.parametrize("verb", [Verb.FILTER, Verb.PRIORITIZE], ids=["filter", "prioritize"])
def test_a_new_pod_over_cheap_rules_is_evaluated_within_the_loop_budget_and_a_costly_call_is_not(
    tmp_path: Path, verb: Verb
) -> None:
    book = load_spec(tmp_path, make_engine("cpp"), LOOP_SPEC)
    nodes = [make_context(make_node(f"node-{i}")) for i in range(50)]

    def fast(pod: dict[str, Any], candidates: list[NodeContext]) -> Decision:
        return evaluate(prepared(book), Call(pod, candidates, verb, NOW))

    def plain(pod: dict[str, Any]) -> Decision:
        return reference.evaluate(book, Call(pod, nodes, verb, NOW))

    fast(make_pod("first"), nodes)  # the nodes' memos made
    pod = make_pod("second", labels={"app": "node-3"})  # a pod key never seen: its rules must run
    with within(2000):
        found = fast(pod, nodes)
    assert found == plain(pod)
    third = make_pod("third", labels={"app": "node-4"})
    with within(1), pytest.raises(NeedsEvaluationError):
        fast(third, nodes)
    # What was kept before it stopped is complete results only: the call, made again, is the reference's.
    assert fast(third, nodes) == plain(third)
    fresh = [make_context(make_node(f"new-{i}")) for i in range(50)]  # 50 memos to make: past 2000 µs
    with within(2000), pytest.raises(NeedsEvaluationError):
        fast(pod, fresh)


def test_prioritize_answers_are_encoded_as_the_general_encoding_would() -> None:
    rng = random.Random(7)
    kept: dict[str, NodeDecision] = {}  # the verdicts a table would keep: encoded once, answered again
    for _ in range(50):
        names = [rng.choice(["node-", 'n"q\\', "nœud-", "\u2028x-"]) + str(i) for i in range(rng.randint(0, 20))]
        verdicts = [kept.get(name) or NodeDecision(name, score=rng.choice([0, 5, 10, 100, None])) for name in names]
        kept.update(zip(names, verdicts, strict=True))
        scores = {verdict.name: verdict.score or 0 for verdict in verdicts}
        assert wire.host_priorities(names, verdicts) == orjson.dumps(host_priority_list(scores))
    assert all(verdict.encoded for verdict in kept.values())
    for odd in (-1, 101, 10**12):  # any integer score
        verdicts = [NodeDecision("a", score=3), NodeDecision("b", score=odd)]
        assert wire.host_priorities(["a", "b"], verdicts) == orjson.dumps(
            [{"Host": "a", "Score": 3}, {"Host": "b", "Score": odd}]
        )


def test_the_passed_flags_are_counted_once_and_not_at_all_when_no_filter_ran() -> None:
    """The shadow comparison keeps a byte a candidate of the live decision: the filter answer's own count of
    them (`outcome`), or all ones for a prioritize decision, not a second pass over the verdicts (30 µs at 1000
    candidates, after every answer)."""
    filtered = Decision(1, [], {"a": NodeDecision("a", passed=False, reason="r"), "b": NodeDecision("b")})
    filtered.outcome()
    flags = filtered.passed_flags()
    assert flags == b"\x00\x01"
    assert filtered.passed_flags() is flags
    scored = Decision(1, [])
    scored.set_verdicts(["a", "b", "c"], [NodeDecision("a", score=1)] * 3, filtered=False)
    assert scored.passed_flags() == b"\x01\x01\x01"
    scored.set_verdicts(["a"], [NodeDecision("a", passed=False)])
    assert scored.passed_flags() == b"\x00"


def test_a_filter_outcome_splits_reasons_by_resolvable_in_candidate_order() -> None:
    verdicts = {
        "a": NodeDecision("a", passed=False, reason="r-a", resolvable=True),
        "b": NodeDecision("b"),
        "c": NodeDecision("c", passed=False, reason="r-c"),
        "d": NodeDecision("d", passed=False, reason="r-d", resolvable=True),
        "e": NodeDecision("e", passed=False, reason="r-e"),
    }
    passed, failed, unresolvable = Decision(1, [], verdicts).outcome()
    assert (passed, list(failed.items()), list(unresolvable.items())) == (
        ["b"],
        [("a", "r-a"), ("d", "r-d")],
        [("c", "r-c"), ("e", "r-e")],
    )
    assert Decision(1, [], {"b": NodeDecision("b")}).outcome() == (["b"], {}, {})


@pytest.mark.parametrize("status", [200, 400, 413, 500])
@pytest.mark.parametrize("body", [b"{}", b'{"NodeNames":["a"]}', b"[]"])
def test_an_encoded_answer_has_the_headers_starlette_would_give_it(body: bytes, status: int) -> None:
    answer = JsonResponse(body, status)
    plain = Response(body, status_code=status, media_type="application/json")
    assert (answer.status_code, answer.body, answer.raw_headers) == (plain.status_code, plain.body, plain.raw_headers)
    assert answer.background is None


ZONE_SPEC = """
filters:
- name: same-zone
  expression: "node.metadata.labels['zone'] == pod.metadata.labels['zone']"
scores:
- name: flat
  expression: "1.0"
"""
"""A per-pod filter: the nodes it groups (by their projections, one per node) are three zones."""


def test_warm_makes_ready_what_the_first_new_pod_needs_of_the_nodes(tmp_path: Path) -> None:
    """`warm` (the refresh ahead after a poll or a reload; the shadow book's slices) gives the nodes their memos
    and their projections for the per-pod rules: the first pod after it runs its rules within a budget that
    making 200 projections (2000 µs estimated) would go past."""
    nodes = [make_context(make_node(f"node-{i}", labels={"zone": "abc"[i % 3]})) for i in range(200)]
    pod = make_pod("first", labels={"zone": "b"})
    warmed = load_spec(tmp_path / "warmed", make_engine("cpp"), ZONE_SPEC)
    warm(prepared(warmed), nodes)
    with within(1000):
        found = evaluate(prepared(warmed), Call(pod, nodes, Verb.FILTER, NOW))
    assert found == reference.evaluate(warmed, Call(pod, nodes, Verb.FILTER, NOW))
    assert len(found.passed) == 67
    cold = load_spec(tmp_path / "cold", make_engine("cpp"), ZONE_SPEC)
    evaluate(prepared(cold), Call(make_pod("scored"), nodes, Verb.PRIORITIZE, NOW))  # memos, no projection
    with within(1000), pytest.raises(NeedsEvaluationError):
        evaluate(prepared(cold), Call(pod, nodes, Verb.FILTER, NOW))
