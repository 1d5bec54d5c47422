"""Compares a case's expectations with a Decision and says, field by field, what differs.

Each line names the field, what was expected and what the rules actually decided (with the
rejection reason or the score), so a failing case can be fixed without running explain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rulesched.decide.decision import Decision
from rulesched.tools.ruletest.model import Expect

Check = Callable[[Expect, Decision], list[str]]


def _names(names: Iterable[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _ranked(decision: Decision) -> str:
    ranking = decision.ranking()
    return _names(f"{n.name} ({n.score})" for n in ranking) if ranking else "no node passed"


def _fate(decision: Decision, name: str) -> str:
    node = decision.nodes[name]
    return f"passed with score {node.score}" if node.passed else f"rejected: {node.reason}"


def _unknown(expect: Expect, decision: Decision) -> list[str]:
    named = {
        "feasible": expect.feasible or [],
        "rejected": list(expect.rejected or {}),
        "best": [expect.best] if expect.best else [],
        "order": expect.order or [],
        "scores": list(expect.scores or {}),
    }
    known = list(decision.nodes)
    return [
        f"{field}: {name} is not a node of the snapshot (nodes: {', '.join(known)})"
        for field, names in named.items()
        for name in names
        if name not in decision.nodes
    ]


def _applied(expect: Expect, decision: Decision) -> list[str]:
    if expect.appliedRuleSets is None or set(expect.appliedRuleSets) == set(decision.applied):
        return []
    return [f"appliedRuleSets: expected {_names(sorted(expect.appliedRuleSets))}, actual {_names(decision.applied)}"]


def _feasible(expect: Expect, decision: Decision) -> list[str]:
    if expect.feasible is None or set(expect.feasible) == set(decision.passed):
        return []
    lines = [f"feasible: expected {_names(sorted(expect.feasible))}, actual {_names(decision.passed)}"]
    for name in expect.feasible:
        if name in decision.nodes and not decision.nodes[name].passed:
            lines.append(f"  {name} should pass but was rejected: {decision.nodes[name].reason}")
    for name in decision.passed:
        if name not in expect.feasible:
            lines.append(f"  {name} passed but should not")
    return lines


def _rejected(expect: Expect, decision: Decision) -> list[str]:
    lines = []
    for name, text in (expect.rejected or {}).items():
        node = decision.nodes.get(name)
        if node is None:
            continue
        if node.passed:
            lines.append(f"rejected: {name} passed (score {node.score}), expected a rejection containing {text!r}")
        elif text not in (node.reason or ""):
            lines.append(f"rejected: {name} was rejected with {node.reason!r}, which does not contain {text!r}")
    return lines


def _best(expect: Expect, decision: Decision) -> list[str]:
    ranking = decision.ranking()
    if expect.best is None or expect.best not in decision.nodes:
        return []
    if ranking and ranking[0].name == expect.best:
        return []
    actual = ranking[0].name if ranking else "none"
    return [
        f"best: expected {expect.best}, actual {actual}",
        f"  {expect.best} {_fate(decision, expect.best)}; ranking {_ranked(decision)}",
    ]


def _order(expect: Expect, decision: Decision) -> list[str]:
    if expect.order is None or expect.order == [n.name for n in decision.ranking()]:
        return []
    return [f"order: expected {_names(expect.order)}, actual {_ranked(decision)}"]


def _scores(expect: Expect, decision: Decision) -> list[str]:
    lines = []
    for name, score in (expect.scores or {}).items():
        node = decision.nodes.get(name)
        if node is None or (node.passed and node.score == score):
            continue
        lines.append(f"scores: {name} expected {score}, actual {_fate(decision, name)}")
    return lines


CHECKS: tuple[Check, ...] = (_unknown, _applied, _feasible, _rejected, _best, _order, _scores)


def compare(expect: Expect, decision: Decision) -> list[str]:
    """Every difference between `expect` and `decision`; empty when the case passes."""
    return [line for check in CHECKS for line in check(expect, decision)]


def actual_summary(decision: Decision) -> list[str]:
    """What the rules decided, in a few lines, shown under a failing case."""
    lines = [f"applied rule sets: {_names(decision.applied)}", f"ranking: {_ranked(decision)}"]
    lines += [f"rejected {n.name}: {n.reason}" for n in decision.nodes.values() if not n.passed]
    lines += [f"error {e.rule_set}/{e.rule} on {e.node or 'the pod'}: {e.error}" for e in decision.errors]
    return lines
