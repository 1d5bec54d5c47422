"""What a Decision collects once asked, after the answer is sent: rule errors and how many nodes each filter
rejected (`collect`), C-level passes over the candidates' verdicts.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence

from rulesched.decide.decision import Decision, Failures, NodeDecision, RuleError
from rulesched.decide.fast.outcomes import NONE_FAILED, Errors, FailedVerdict, Kind, Made, PositionedError
from rulesched.decide.fast.rule import Rule
from rulesched.decide.fast.tables import Verdicts
from rulesched.rules.context import NodeContext

_FEW_FAILED = 64
"""Up to this many failed verdicts in a table, all are handed to the Decision to count its candidates' with
C-level scans (`list.count`); beyond (a message per node, say), those its candidates have, counted at once."""


def collect(table: Verdicts, found: Sequence[NodeDecision], nodes: Sequence[NodeContext], decision: Decision) -> None:
    """Hand the Decision what it needs to find, once asked, the errors of the verdicts `found` for `nodes` in
    `table` and the filters they failed (a verdict is shared by the nodes that fare alike: each is counted
    once): the extender asks after its answer is sent. What the table holds is taken now, as it is (it changes
    with later calls, maybe in the evaluation thread): its few entries, or those of these nodes."""
    errors_of = table.errors
    if errors_of:
        if len(errors_of) <= len(nodes):
            errors_of = dict(errors_of)
        else:
            errors_of = {node: errors_of[node] for node in filter(errors_of.__contains__, nodes)}
    failed = table.failed
    if not failed and not errors_of:
        decision.counted_failures = Counter()
        return
    if len(failed) <= _FEW_FAILED:
        kinds = list(failed.values())
    else:
        kinds = [failed[key] for key in set(map(id, found)) if key in failed]
    decision.collect_later(functools.partial(_collected, found, nodes, errors_of, kinds), found)


def _collected(
    found: Sequence[NodeDecision],
    nodes: Sequence[NodeContext],
    errors_of: Mapping[NodeContext, Errors],
    kinds: list[FailedVerdict],
    rejecting: list[NodeDecision] | None,
) -> tuple[list[RuleError], Failures]:
    """The errors of `nodes` (from `errors_of`), added rule by rule, node by node (the reference's order), and
    how many of the verdicts `found` failed each filter (`kinds`: the failed verdicts, each with the filters
    it failed); C-level passes, as this runs for every candidate of every call. When every failed verdict
    rejected its node, they are counted among those of `found` that did (`rejecting`, when known): usually
    a few of the candidates."""
    errors: list[RuleError] = []
    if errors_of:
        with_errors = filter(errors_of.__contains__, nodes)  # in candidate order
        by_node = [
            (position, index, error) for index, node in enumerate(with_errors) for position, error in errors_of[node]
        ]
        errors = [error for _, _, error in sorted(by_node, key=lambda e: (e[0], e[1]))]
    counted: Failures = Counter()
    if kinds:
        if rejecting is not None and not any(verdict.passed for verdict, _ in kinds):
            found = rejecting
        ids = list(map(id, found))
        counts: Mapping[int, int] = Counter(ids) if len(kinds) > _FEW_FAILED else {}
        for verdict, failures in kinds:
            count = counts.get(id(verdict), 0) if counts else ids.count(id(verdict))
            if count:
                for rule in failures:
                    counted[rule] += count
    return errors, counted


def error_kinds(
    rules: Sequence[Rule], nodes: Sequence[NodeContext], verdicts: Sequence[NodeDecision], errors: Sequence[RuleError]
) -> list[Kind]:
    """The verdicts scored with `errors`, each with its node's errors by rule position (as `Verdicts` keeps them)."""
    if not errors:
        return []
    position = {(rule.rule_set, rule.compiled.name): rule.position for rule in rules}
    index = {node.name: i for i, node in enumerate(nodes)}
    by_node: dict[int, list[PositionedError]] = {}
    for error in errors:
        by_node.setdefault(index[error.node or ""], []).append(
            PositionedError(position[error.rule_set, error.rule], error)
        )
    return [Kind(i, Made(verdicts[i], tuple(found), NONE_FAILED)) for i, found in by_node.items()]
