"""The reference evaluator: the rules' semantics written as plainly as possible. No I/O, no caches.

`rulesched.rules.engine.evaluate` gives the same Decision faster (DESIGN.md §4); this one is what it
is tested against (tests/test_fast_path.py), and its small helpers define the semantics both share.

Semantics (DESIGN.md §1): a rule set applies when all its match conditions hold; a node passes when
every Enforce filter of every applying rule set is true; Audit rules are evaluated and reported but
change nothing. Each score rule is normalized over the candidates (MinMax to 0..10, or Clamp) and the
node's score is the weighted mean, rounded to an integer 0..10. Each rule runs over all candidates
in one engine call.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.rules.book import CompiledFilter, CompiledRuleSet, CompiledScore, RuleBook
from rulesched.rules.cel import CelEvalError, Engine, Program
from rulesched.rules.context import NodeContext, namespace_view, pod_requests
from rulesched.rules.decision import Decision, FilterResult, NodeDecision, RuleError, ScoreResult

MAX_SCORE = 10
"""kube-scheduler's MaxExtenderPriority."""
MESSAGE_MAX = 1024
"""Longest reason a messageExpression may give; longer ones are cut (docs/rules/cost.md)."""


def evaluate(
    book: RuleBook,
    pod: Mapping[str, Any],
    nodes: Sequence[NodeContext],
    *,
    now: datetime.datetime | None = None,
    run_filters: bool = True,
    run_scores: bool = True,
    namespace: Mapping[str, Any] | None = None,
) -> Decision:
    """Evaluate `book` for `pod` over `nodes`. Scores are computed over the nodes that pass.

    `namespace` is the pod's Namespace object (`namespaceObject`), None when not known."""
    engine = book.engine
    shared = {
        "pod": engine.convert(pod),
        "requests": engine.convert(pod_requests(pod)),
        "now": engine.convert(now or datetime.datetime.now(datetime.UTC)),
        "namespaceObject": engine.convert(namespace_view(pod, namespace)),
    }
    decision = Decision(generation=book.generation, applied=[], nodes={n.name: NodeDecision(n.name) for n in nodes})
    applying = [rs for rs in book.rule_sets if applies(rs, engine, shared, decision)]
    decision.applied = [rs.name for rs in applying]
    bindings = [engine.bindings({**shared, **_node_values(engine, n)}) for n in nodes]
    if run_filters:
        for rule_set in applying:
            for rule in rule_set.filters:
                _filter(rule_set.name, rule, nodes, bindings, decision)
    if run_scores:
        passing = [i for i, n in enumerate(nodes) if decision.nodes[n.name].passed]
        _score_all(applying, [nodes[i] for i in passing], [bindings[i] for i in passing], decision)
    return decision


def _node_values(engine: Engine, node: NodeContext) -> Mapping[str, Any]:
    values = node.cache.get(engine.name)
    if values is None:
        values = {
            "node": engine.convert(node.node),
            "metrics": engine.convert(node.metrics),
            "allocatable": engine.convert(node.allocatable),
            "variables": engine.convert({}),
            "pods": engine.convert(list(node.pods.pods)),
            "allocated": engine.convert(node.pods.allocated),
            "recent": engine.convert(node.pods.recent),
        }
        node.cache[engine.name] = values
    return values


def applies(rule_set: CompiledRuleSet, engine: Engine, shared: Mapping[str, Any], decision: Decision) -> bool:
    """All conditions true → applies. As in a ValidatingAdmissionPolicy, a false condition wins over an
    error; an error with no false condition fails closed (the set applies) and is recorded."""
    if not rule_set.conditions:
        return True
    bindings = engine.bindings(shared)
    errors: list[RuleError] = []
    for condition in rule_set.conditions:
        try:
            result = condition.program.evaluate(bindings)
        except CelEvalError as error:
            errors.append(RuleError(rule_set.name, condition.name, None, str(error)))
            continue
        if result is False:
            return False
        if result is not True:
            message = f"match condition returned {type(result).__name__}, not bool"
            errors.append(RuleError(rule_set.name, condition.name, None, message))
    decision.errors.extend(errors)
    return True


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


def reject(verdict: NodeDecision, reason: str, resolvable: bool) -> None:
    """The first failing filter gives the reason, unless a later one shows preemption cannot help."""
    if verdict.passed:
        verdict.passed, verdict.reason, verdict.resolvable = False, reason, resolvable
    elif verdict.resolvable and not resolvable:
        verdict.reason, verdict.resolvable = reason, False


def not_bool(result: Any) -> str | None:
    if isinstance(result, CelEvalError):
        return str(result)
    if not isinstance(result, bool):
        return f"filter returned {type(result).__name__}, not bool"
    return None


def filter_message(rule: CompiledFilter, binding: Any, program: Program | None = None) -> str:
    """The reason text of a failed filter; `program` replaces the rule's message program when given."""
    program = program or rule.message_program
    if program is not None:
        try:
            text = program.evaluate(binding)
        except CelEvalError:
            return rule.message
        # As in Kubernetes, a blank or multi-line result falls back to the static message.
        if isinstance(text, str) and text.strip() and "\n" not in text:
            text = text.strip()
            # Cut, so that a message built per node cannot make an answer of gigabytes.
            return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "…"
    return rule.message


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


def round_score(mean: float) -> int:
    """Half up, as the design says; rounded to 9 places first so that 4.4999999999 (float noise) is 5."""
    return min(MAX_SCORE, max(0, math.floor(round(mean, 9) + 0.5)))


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


def not_number(result: Any) -> str | None:
    if isinstance(result, CelEvalError):
        return str(result)
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        return f"score returned {type(result).__name__}, not a number"
    if not math.isfinite(result):
        return f"score returned {result}, not a finite number"
    return None


def normalize(raws: Sequence[float | None], how: str) -> list[float]:
    """Each raw value mapped to 0..10; a node whose rule failed gets 0."""
    if how == "Clamp":
        return [0.0 if r is None else min(float(MAX_SCORE), max(0.0, r)) for r in raws]
    known = [r for r in raws if r is not None]
    if not known:
        return [0.0] * len(raws)
    low, high = min(known), max(known)
    if high == low:
        return [0.0 if r is None else float(MAX_SCORE) for r in raws]
    # Halved so that a range wider than the largest double (-1e308..1e308) does not overflow.
    span = high / 2 - low / 2
    return [0.0 if r is None else min(float(MAX_SCORE), MAX_SCORE * (r / 2 - low / 2) / span) for r in raws]
