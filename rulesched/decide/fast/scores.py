"""Score outcomes, a MinMax rule's range over the candidates, and normalization within a given range."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from rulesched.decide import semantics
from rulesched.decide.fast.outcomes import ScoreOutcome

_RAW = attrgetter("raw")


def score_outcome(result: Any) -> ScoreOutcome:
    error = semantics.not_number(result)
    return ScoreOutcome(None if error else float(result), error)


def raw_range(outcomes: Sequence[ScoreOutcome]) -> tuple[float, float] | None:
    """The least and the greatest raw value of `outcomes` (None: no value); C-level unless one has none."""
    known: list[Any] = list(map(_RAW, outcomes))
    try:  # a None among floats fails the comparisons: checking for one first would cost as much again
        low, high = min(known), max(known)
    except (TypeError, ValueError):  # a None among the values, or no value
        low = high = None
    if low is None or high is None:
        values: list[float] = list(itertools.compress(known, map(operator.is_not, known, itertools.repeat(None))))
        return (min(values), max(values)) if values else None
    return low, high


def normalized_within(raws: Sequence[float | None], how: str, known: tuple[float, float] | None) -> list[float]:
    """`semantics.normalize` with the candidates' range given, so that a subset of them can be scored."""
    if how == "Clamp" or known is None:
        return semantics.normalize(raws, how)
    low, high = known
    return semantics.normalize([*raws, low, high], how)[: len(raws)]
