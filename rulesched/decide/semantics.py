"""The semantics both evaluations share (docs/rules/language.md), in one place: when a rule set applies, how a
filter's result becomes a verdict and its reason, how a score's raw values become 0..10 and a node's score.

`rulesched.decide.reference` (the plain evaluation, the tests' oracle) and `rulesched.decide.fast.engine` (the
fast path) both build their Decisions with these, so that they cannot drift apart; neither imports the
other.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from rulesched.decide.decision import Decision, NodeDecision, RuleError
from rulesched.rules.cel import CelEvalError, Engine, Program
from rulesched.rules.cel.types import value_type
from rulesched.rules.compiled import CompiledFilter, CompiledRuleSet

MAX_SCORE = 10
"""kube-scheduler's MaxExtenderPriority."""
MESSAGE_MAX = 1024
"""Longest reason a messageExpression may give; longer ones are cut (docs/rules/cost.md)."""


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
            message = f"match condition returned {value_type(result)}, not bool"
            errors.append(RuleError(rule_set.name, condition.name, None, message))
    decision.errors.extend(errors)
    return True


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
        return f"filter returned {value_type(result)}, not bool"
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


def round_scores(totals: Iterable[float], weights: float) -> Iterator[int]:
    """Each node's score from its weighted total: the mean over `weights` rounded half up, within 0..MAX_SCORE;
    rounded to 9 places first so that 4.4999999999 (float noise) is 5. C-level passes: the fast path scores
    every candidate with it."""
    means = map(round, map(operator.truediv, totals, itertools.repeat(weights)), itertools.repeat(9))
    rounded = map(math.floor, map(operator.add, means, itertools.repeat(0.5)))
    return map(min, itertools.repeat(MAX_SCORE), map(max, itertools.repeat(0), rounded))


def round_score(mean: float) -> int:
    """`round_scores` of one mean (a total over a weight of 1)."""
    return next(round_scores((mean,), 1.0))


def not_number(result: Any) -> str | None:
    if isinstance(result, CelEvalError):
        return str(result)
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        return f"score returned {value_type(result)}, not a number"
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
