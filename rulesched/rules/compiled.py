"""The compiled forms of a rule set's parts: what the loader makes of each expression, and what both
evaluations (the fast path and the reference) read. Plain frozen data, importing nothing of the
evaluation, so that the rule book, the plan and the semantics all stand on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rulesched.rules.cel import Program
from rulesched.rules.cel.analysis import Path
from rulesched.rules.model import RuleSet

Paths = Mapping[str, frozenset[Path]]
"""Per context name, the field paths an expression (with the variables it uses) reads."""


@dataclass(frozen=True, slots=True)
class CompiledCondition:
    name: str
    program: Program
    paths: Paths
    cost: int = 0
    """The estimated worst-case cost of one evaluation (docs/rules/cost.md)."""


@dataclass(frozen=True, slots=True)
class CompiledFilter:
    name: str
    program: Program
    message: str
    message_program: Program | None
    resolvable: bool
    ignore_errors: bool
    enforce: bool
    reads: frozenset[str]
    paths: Paths
    cost: int = 0
    """The estimated worst-case cost of one evaluation, message included (docs/rules/cost.md)."""


@dataclass(frozen=True, slots=True)
class CompiledScore:
    name: str
    program: Program
    weight: float
    normalize: Literal["MinMax", "Clamp"]
    enforce: bool
    reads: frozenset[str]
    paths: Paths
    cost: int = 0
    """The estimated worst-case cost of one evaluation (docs/rules/cost.md)."""


@dataclass(frozen=True, slots=True)
class CompiledRuleSet:
    name: str
    file: str
    conditions: tuple[CompiledCondition, ...]
    filters: tuple[CompiledFilter, ...]
    scores: tuple[CompiledScore, ...]
    source: RuleSet
