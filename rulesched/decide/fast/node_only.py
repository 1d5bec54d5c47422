"""The node-only results of new memos: one engine call per rule and chunk of nodes (`with_memos`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from rulesched.decide.fast.filters import filter_outcomes
from rulesched.decide.fast.groups import Candidates, Results
from rulesched.decide.fast.memos import NodeMemo, node_bindings
from rulesched.decide.fast.outcomes import NodeOutcome
from rulesched.decide.fast.plan import Plan
from rulesched.decide.fast.rule import Rule
from rulesched.decide.fast.scores import score_outcome
from rulesched.rules.compiled import CompiledFilter
from rulesched.rules.context import NodeContext


def with_memos(plan: Plan, nodes: Sequence[NodeContext]) -> Candidates:
    """Each node's memo for the plan; those made now get their node-only results first."""
    memos, fresh = plan.caches.memos(nodes)
    if fresh:
        _node_only(plan, Candidates(nodes, memos).subset(fresh))
        for i in fresh:
            plan.caches.keep(nodes[i], memos[i])
    return Candidates(nodes, memos)


_CHUNK = 32
"""Nodes whose node-only results are computed together: few enough that their temporary bindings
(about 8 KB each with cel-cpp) stay small, so that a first request over 5000 nodes does not leave the
process thousands of freed activations larger."""


def _node_only(plan: Plan, candidates: Candidates) -> None:
    """Every node-only result of the book for new memos, one engine call per rule and chunk of nodes; for
    memos made again after a new metrics sample, only the results of the rules that read `metrics`."""
    nodes, memos = candidates
    new = [i for i, memo in enumerate(memos) if memo.carried is None]
    again = [i for i, memo in enumerate(memos) if memo.carried is not None]
    for group, rules in ((new, plan.node_only), (again, [plan.node_only[slot] for slot in plan.sample_slots])):
        for start in range(0, len(group), _CHUNK):
            chunk = group[start : start + _CHUNK]
            bindings = [node_bindings(plan.engine, memos[i], keep=False) for i in chunk]
            names = [nodes[i].name for i in chunk]
            columns = [_node_only_column(plan, rule, names, bindings) for rule in rules]
            for row, i in enumerate(chunk):
                _complete(memos[i], rules, [column[row] for column in columns])


def _complete(memo: NodeMemo, rules: Sequence[Rule], results: list[NodeOutcome]) -> None:
    """Put the node-only `results` of `rules` in `memo`: all of them, or those a new sample made again."""
    carried = memo.carried
    if carried is None:
        memo.node_only = results
        return
    for rule, result in zip(rules, results, strict=True):
        carried[rule.slot] = result
    memo.node_only, memo.carried = cast(list[NodeOutcome], carried), None  # every None replaced


def _node_only_column(plan: Plan, rule: Rule, names: Sequence[str], bindings: Sequence[Any]) -> Sequence[Any]:
    results = Results(rule.compiled.program.evaluate_many(bindings), bindings)
    if isinstance(rule.compiled, CompiledFilter):
        return filter_outcomes(plan, rule, names, results, rule.compiled.message_program)
    return [score_outcome(r) for r in results.values]
