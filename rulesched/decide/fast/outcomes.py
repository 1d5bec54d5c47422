"""The records the fast path keeps in its caches: a rule's outcome on a node, a verdict as made (with its
errors and failed filters), and which rule sets apply to a pod. Named tuples: built once, read by name,
and as cheap as the bare tuples they replace.
"""

from __future__ import annotations

from typing import NamedTuple

from rulesched.decide.decision import FilterResult, NodeDecision, RuleError


class FilterOutcome(NamedTuple):
    """One filter on one node: what the Decision records, and the reason when it rejects."""

    result: FilterResult
    reason: str | None
    error: RuleError | None


class ScoreOutcome(NamedTuple):
    """One score on one node: its raw value (None: none), or why it has none."""

    raw: float | None
    error: str | None


NodeOutcome = FilterOutcome | ScoreOutcome
"""A node-only rule's outcome on a node, kept in the node's memo."""

Failed = frozenset[tuple[str, str, bool]]
"""The (rule set, rule, enforced) of each filter that returned false for a verdict."""

NONE_FAILED: Failed = frozenset()


class PositionedError(NamedTuple):
    """A verdict's rule error, with its rule's position in evaluation order (errors are reported in it)."""

    position: int
    error: RuleError


Errors = tuple[PositionedError, ...]
"""A verdict's rule errors."""


class Made(NamedTuple):
    """A verdict as made, with its errors and the filters it failed (interned: `Caches.interned`), which
    `Decision.failures` counts: kept in `Verdicts`."""

    verdict: NodeDecision
    errors: Errors
    failed: Failed


class Kind(NamedTuple):
    """A distinct verdict made for some nodes, after the index of one of them."""

    at: int
    made: Made


class FailedVerdict(NamedTuple):
    """A verdict that failed filters, and them (the verdict is kept alive with it, so that its `id` stays its)."""

    verdict: NodeDecision
    failed: Failed


class Applying(NamedTuple):
    """The rule sets whose match conditions hold for a pod: their indices and names, and the conditions' errors."""

    indices: tuple[int, ...]
    names: list[str]
    errors: list[RuleError]
