"""The reference evaluator: the rules' semantics written as plainly as possible. No I/O, no caches.

`rulesched.decide.fast.evaluate` gives the same Decision faster, from caches (docs/architecture.md, "The
caches"); this one is what it is tested against (tests/decide/test_fast_path.py), and is never used to answer a
request. The semantics both share (applies, reject, normalize, …) live in `rulesched.decide.semantics`.

Semantics (docs/rules/language.md): a rule set applies when all its match conditions hold; a node passes when
every Enforce filter of every applying rule set is true; Audit rules are evaluated and reported but
change nothing. Each score rule is normalized over the candidates (MinMax to 0..10, or Clamp) and the
node's score is the weighted mean, rounded to an integer 0..10. Each rule runs over all candidates
in one engine call.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.decide.decision import Decision, FilterResult, NodeDecision, RuleError, ScoreResult
from rulesched.decide.semantics import (
    MAX_SCORE,
    MESSAGE_MAX,
    applies,
    filter_message,
    normalize,
    not_bool,
    not_number,
    reject,
    round_score,
)
from rulesched.decide.verbs import Call
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import Engine
from rulesched.rules.compiled import CompiledFilter, CompiledRuleSet, CompiledScore
from rulesched.rules.context import NodeContext
from rulesched.rules.vocabulary import DERIVED, RequestInputs, node_values, request_values

__all__ = ["MAX_SCORE", "MESSAGE_MAX", "evaluate", "normalize", "round_score"]


def evaluate(book: RuleBook, call: Call) -> Decision:
    """Evaluate `book` for the call's pod over its nodes: what its verb runs (scores over the nodes that pass).

    A node named twice is evaluated once, as its first occurrence; the call's deadline is not kept."""
    pod, now, namespace = call.pod, call.now, call.namespace
    distinct: dict[str, NodeContext] = {}
    for node in call.nodes:
        distinct.setdefault(node.name, node)
    nodes = list(distinct.values())
    engine = book.engine
    values = request_values(RequestInputs(pod, namespace, now or datetime.datetime.now(datetime.UTC), call.estimate))
    shared = {name: engine.convert(value) for name, value in values.items()}
    decision = Decision(generation=book.generation, applied=[], nodes={n.name: NodeDecision(n.name) for n in nodes})
    applying = [rs for rs in book.rule_sets if applies(rs, engine, shared, decision)]
    decision.applied = [rs.name for rs in applying]
    bindings = [engine.bindings({**shared, **_node_values(engine, n)}) for n in nodes]
    if call.verb.filters:
        for rule_set in applying:
            for rule in rule_set.filters:
                _filter(rule_set.name, rule, nodes, bindings, decision)
    if call.verb.scores:
        passing = [i for i, n in enumerate(nodes) if decision.nodes[n.name].passed]
        _score_all(applying, [nodes[i] for i in passing], [bindings[i] for i in passing], decision)
    return decision


def _node_values(engine: Engine, node: NodeContext) -> Mapping[str, Any]:
    values = {name: engine.convert(value) for name, value in node_values(node).items()}
    return values | {name: engine.convert({}) for name in DERIVED}


def _filter(
    rule_set: str, rule: CompiledFilter, nodes: Sequence[NodeContext], bindings: Sequence[Any], decision: Decision
) -> None:
    for node, binding, result in zip(nodes, bindings, rule.program.evaluate_many(bindings), strict=True):
        verdict = decision.nodes[node.name]
        error = not_bool(result)
        if error is not None:
            decision.errors.append(RuleError(rule_set, rule.name, node.name, error))
            outcome = FilterResult(rule_set, rule.name, "error", rule.enforce, error=error)
            failed = not rule.ignore_errors
            reason = f"rule {rule_set}/{rule.name} could not be evaluated"
        else:
            failed = result is False
            message = filter_message(rule, binding) if failed else None
            outcome = FilterResult(rule_set, rule.name, "pass" if not failed else "fail", rule.enforce, message)
            reason = f"{message} (rule {rule_set}/{rule.name})"
        verdict.filters.append(outcome)
        if failed and rule.enforce:
            reject(verdict, reason, rule.resolvable)


def _score_all(
    applying: Sequence[CompiledRuleSet], nodes: Sequence[NodeContext], bindings: Sequence[Any], decision: Decision
) -> None:
    totals = [0.0] * len(nodes)
    weights = 0.0
    for rule_set in applying:
        for rule in rule_set.scores:
            normalized = _score(rule_set.name, rule, nodes, bindings, decision)
            if rule.enforce:
                weights += rule.weight
                totals = [t + rule.weight * n for t, n in zip(totals, normalized, strict=True)]
    for node, total in zip(nodes, totals, strict=True):
        decision.nodes[node.name].score = round_score(total / weights) if weights else 0


def _score(
    rule_set: str, rule: CompiledScore, nodes: Sequence[NodeContext], bindings: Sequence[Any], decision: Decision
) -> list[float]:
    raws: list[float | None] = []
    errors: list[str | None] = []
    for node, result in zip(nodes, rule.program.evaluate_many(bindings), strict=True):
        error = not_number(result)
        if error is not None:
            decision.errors.append(RuleError(rule_set, rule.name, node.name, error))
        errors.append(error)
        raws.append(None if error else float(result))
    normalized = normalize(raws, rule.normalize)
    for node, raw, value, error in zip(nodes, raws, normalized, errors, strict=True):
        decision.nodes[node.name].scores.append(
            ScoreResult(rule_set, rule.name, rule.enforce, rule.weight, raw, value, error)
        )
    return normalized
