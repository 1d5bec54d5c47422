"""Filter outcomes and the verdicts made of them (`verdict_of`), shared by the nodes that fare alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Sequence

from rulesched.decide import semantics
from rulesched.decide.decision import FilterResult, NodeDecision, Outcome, RuleError
from rulesched.decide.fast.groups import Results
from rulesched.decide.fast.outcomes import FilterOutcome, Made, PositionedError
from rulesched.decide.fast.plan import Plan
from rulesched.decide.fast.rule import Rule
from rulesched.rules.cel import Program
from rulesched.rules.compiled import CompiledFilter


def filter_outcomes(
    plan: Plan, rule: Rule, names: Sequence[str], results: Results, message_program: Program | None
) -> list[FilterOutcome]:
    compiled = rule.compiled
    assert isinstance(compiled, CompiledFilter)
    outcomes = []
    passed: FilterOutcome | None = None
    failed: dict[int, FilterOutcome] = {}
    """Failed outcomes by binding (nodes grouped by `results` share one) or, for a static message, all under 0."""
    shared: dict[str, FilterOutcome] = {}
    """Outcomes without an error name no node: one object per message serves every node, and every call
    (interned in the plan), which saves memory and lets `verdicts` share verdicts between nodes."""
    per_binding = (message_program or compiled.message_program) is not None
    for name, result, binding in zip(names, results.values, results.bindings, strict=True):
        if result is True:
            if passed is None:
                passed = plan.caches.interned(_plain_outcome(rule, compiled, None))
            outcomes.append(passed)
        elif result is False:
            key = id(binding) if per_binding else 0
            outcome = failed.get(key)
            if outcome is None:
                message = semantics.filter_message(compiled, binding, message_program)
                outcome = shared.get(message)
                if outcome is None:
                    outcome = shared[message] = plan.caches.interned(_plain_outcome(rule, compiled, message))
                failed[key] = outcome
            outcomes.append(outcome)
        else:
            error = semantics.not_bool(result)
            assert error is not None
            errored = FilterResult(rule.rule_set, compiled.name, "error", compiled.enforce, error=error)
            reason = f"rule {rule.rule_set}/{compiled.name} could not be evaluated"
            found = RuleError(rule.rule_set, compiled.name, name, error)
            outcomes.append(
                FilterOutcome(errored, reason if not compiled.ignore_errors and compiled.enforce else None, found)
            )
    return outcomes


def _plain_outcome(rule: Rule, compiled: CompiledFilter, message: str | None) -> FilterOutcome:
    """The outcome of a filter that evaluated to a bool: failed (with `message`) or passed (None)."""
    status: Outcome = "fail" if message is not None else "pass"
    result = FilterResult(rule.rule_set, compiled.name, status, compiled.enforce, message)
    reason = f"{message} (rule {rule.rule_set}/{compiled.name})" if message is not None and compiled.enforce else None
    return FilterOutcome(result, reason, None)


def verdict_of(plan: Plan, rules: Sequence[Rule], outcomes: Sequence[FilterOutcome]) -> Made:
    """A verdict from filters' outcomes, with its errors and its failed rules (interned): shared by every node
    with those outcomes, so it names none (`Decision` knows the names)."""
    verdict = NodeDecision("")
    errors = []
    for rule, outcome in zip(rules, outcomes, strict=True):
        verdict.filters.append(outcome.result)
        if outcome.reason is not None:
            assert isinstance(rule.compiled, CompiledFilter)
            semantics.reject(verdict, outcome.reason, rule.compiled.resolvable)
        if outcome.error is not None:
            errors.append(PositionedError(rule.position, outcome.error))
    failed = frozenset((f.rule_set, f.rule, f.enforce) for f in verdict.filters if f.outcome == "fail")
    return Made(verdict, tuple(errors), plan.caches.interned(failed))


def for_node(outcome: FilterOutcome, name: str) -> FilterOutcome:
    """A group's error outcome, naming one of its nodes."""
    assert outcome.error is not None
    return outcome._replace(error=dataclasses.replace(outcome.error, node=name))


def firsts(keys: Sequence[Hashable]) -> Iterable[tuple[Hashable, int]]:
    """Each distinct key of `keys` and an index where it is (the last)."""
    return dict(zip(keys, range(len(keys)), strict=True)).items()
