"""The compiled RuleBook: every expression compiled once, frozen, versioned.

Compiling checks what the models cannot: CEL syntax and types, including the fields read of the
Kubernetes objects and the other context names (`cel/typecheck.py`, one check for both engines), result
types (a filter must be a bool, a score a number), rule set variables used before they are defined, and
what each expression reads, so that the engine knows which results depend on the pod.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from rulesched.rules.cel import CelCompileError, Engine, Program, VariableSource
from rulesched.rules.cel.analysis import paths_of, reads
from rulesched.rules.cel.cost import CostEstimateError, Estimate, estimate, over_limit_message
from rulesched.rules.cel.typecheck import TypeCheckError, line_column, typed
from rulesched.rules.cel.types import DYN, CelType
from rulesched.rules.compiled import CompiledCondition, CompiledFilter, CompiledRuleSet, CompiledScore, Paths
from rulesched.rules.errors import LoadError
from rulesched.rules.metricsource import MetricSource
from rulesched.rules.model import Filter, MatchCondition, RuleSet, Score, Variable
from rulesched.rules.vocabulary import MATCH_READS, listed

_ACCEPTED: dict[str, frozenset[str]] = {
    "bool": frozenset({"bool", "dyn"}),
    "number": frozenset({"int", "uint", "double", "dyn"}),
    "string": frozenset({"string", "dyn"}),
    "any": frozenset(),
}
_MATCH_READS = frozenset(MATCH_READS)
_MATCH_LISTED = listed(MATCH_READS)


@dataclass(frozen=True, slots=True, weakref_slot=True)  # its fast-path plan is kept beside it, while it lives
class RuleBook:
    """The rules in force: rule sets sorted by name, plus what identifies this version of them."""

    rule_sets: tuple[CompiledRuleSet, ...]
    engine: Engine
    hash: str
    generation: int = 1
    loaded_at: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))
    files: tuple[str, ...] = ()
    metric_sources: tuple[MetricSource, ...] = ()
    """The `kind: MetricSource` documents: what `metrics.custom` is made of (docs/rules/prometheus.md)."""
    warnings: tuple[LoadError, ...] = ()
    """What loaded but is said (an unknown Kubernetes field with `--unknown-fields warn`)."""


LineOf = Callable[[tuple[str | int, ...]], int | None]


class _Compiler:
    """Compiles one rule set, collecting every error instead of stopping at the first."""

    def __init__(self, rule_set: RuleSet, file: str, engine: Engine, line_of: LineOf) -> None:
        self.rule_set = rule_set
        self.file = file
        self.engine = engine
        self.line_of = line_of
        self.errors: list[LoadError] = []
        self.warnings: list[LoadError] = []
        """What loads but is said (`LoadError.warning`): it does not stop the rule set compiling."""
        self.variables: dict[str, tuple[VariableSource, frozenset[str], tuple[str, ...]]] = {}
        self.broken: set[str] = set()
        """Variables whose own error is already reported; what reads them is not compiled."""
        self.estimates: dict[str, Estimate] = {}
        """Each compiled variable's estimated cost and result size (docs/rules/cost.md)."""
        self.last_estimate: Estimate | None = None
        self.last_cost = 0
        """The estimated cost of the last expression `program` compiled."""
        self.types: dict[str, CelType] = {}
        """Each compiled variable's type (`variables.x`), for the type check of what reads it."""
        self.last_type: CelType = DYN

    def error(self, loc: tuple[str | int, ...], rule: str | None, message: str, **extra: object) -> None:
        field_path = ".".join(f"[{p}]" if isinstance(p, int) else p for p in loc).replace(".[", "[")
        found = self.warnings if extra.get("warning") else self.errors
        found.append(
            LoadError(
                file=self.file,
                line=self.line_of(loc),
                rule_set=self.rule_set.metadata.name,
                rule=rule,
                field=field_path,
                message=message,
                **extra,  # type: ignore[arg-type]
            )
        )

    def paths(self, *sources: str) -> Paths:
        """What `sources` read, through the variables they use too."""
        named = [n for source in sources if source for n in reads(source).variables if n in self.variables]
        return paths_of([*sources, *(self.variables[n][0].expression for n in self._needed(named))])

    def program(
        self, loc: tuple[str | int, ...], rule: str, source: str, want: str
    ) -> tuple[Program | None, frozenset[str]]:
        found = reads(source)
        undefined = [name for name in found.variables if name not in self.variables]
        for name in undefined:
            self.error(loc, rule, self._undefined(name), expression=source)
        if undefined:
            return None, found.names
        needed = self._needed(found.variables)
        names = found.names.union(*(self.variables[n][1] for n in needed))
        if self.broken.intersection(needed):
            return None, names
        try:
            program = self.engine.compile(source, [self.variables[n][0] for n in needed])
        except CelCompileError as error:
            position = (error.line, error.column) if error.line and error.column else None
            self.error(loc, rule, f"CEL: {error.message}", expression=source, position=position)
            return None, names
        if not self._typed(loc, rule, source, want):
            return None, names
        if _ACCEPTED[want] and program.result_type not in _ACCEPTED[want]:
            self.error(loc, rule, f"must be a {want}, not {program.result_type}", expression=source)
            return None, names
        if not self._within_cost(loc, rule, source):
            return None, names
        self.last_cost = self.last_estimate.cost if self.last_estimate is not None else 0
        return program, names

    def _typed(self, loc: tuple[str | int, ...], rule: str, source: str, want: str) -> bool:
        """True when `source` type-checks against the context's types and its result is what `want` takes;
        else reported, at the part at fault. Unknown Kubernetes fields may be warnings (`Limits.unknown_fields`)."""
        try:
            checked = typed(source, self.types, self.engine.limits.unknown_fields)
        except TypeCheckError as error:
            position = line_column(source, error.position)
            self.error(loc, rule, f"CEL: {error.message}", expression=source, position=position)
            return False
        for warning in checked.warnings:
            position = line_column(source, warning.position)
            self.error(loc, rule, f"CEL: {warning.message}", expression=source, position=position, warning=True)
        self.last_type = checked.type
        found = checked.type.kind
        if _ACCEPTED[want] and found not in _ACCEPTED[want]:
            self.error(loc, rule, f"must be a {want}, not {checked.type}", expression=source)
            return False
        return True

    def _within_cost(self, loc: tuple[str | int, ...], rule: str, source: str) -> bool:
        """True when `source`'s estimated worst-case cost is within the engine's limit; else reported."""
        limit = self.engine.limits.cost
        try:
            found = estimate(source, self.estimates, limit)
        except CostEstimateError as error:
            self.error(loc, rule, f"CEL: {error}", expression=source)
            return False
        self.last_estimate = found
        if found.cost <= limit:
            return True
        self.error(loc, rule, f"CEL: {over_limit_message(found, limit)}", expression=source, position=found.position)
        return False

    def _undefined(self, name: str) -> str:
        if any(variable.name == name for variable in self.rule_set.spec.variables):
            return f"variables.{name} is used before it is defined: a variable may read only earlier ones"
        return f"variables.{name} is not defined in this rule set"

    def _needed(self, direct: Sequence[str]) -> list[str]:
        """The variables `direct` reads, with everything they read, in definition order."""
        needed: set[str] = set()
        pending = list(direct)
        while pending:
            name = pending.pop()
            if name not in needed:
                needed.add(name)
                pending.extend(self.variables[name][2])
        return [name for name in self.variables if name in needed]

    def compile(self) -> CompiledRuleSet | None:
        spec = self.rule_set.spec
        self._check_unique(("filters", "scores"), "rule")
        self._check_unique(("variables",), "variable")
        self._check_unique(("matchConditions",), "match condition")
        conditions = list(self._conditions())
        for index, variable in enumerate(spec.variables):
            loc = ("spec", "variables", index, "expression")
            program, names = self.program(loc, variable.name, variable.expression, "any")
            if variable.name in self.variables:
                continue  # a duplicate, already reported; the first definition stands
            # A broken variable's own reads may name undefined variables; it is never expanded anyway.
            direct = reads(variable.expression).variables if program is not None else ()
            self.variables[variable.name] = (VariableSource(variable.name, variable.expression), names, direct)
            self.types[variable.name] = self.last_type if program is not None else DYN
            if program is None:
                self.broken.add(variable.name)
            elif self.last_estimate is not None:
                self.estimates[variable.name] = self.last_estimate
        filters = list(self._filters())
        scores = list(self._scores())
        if self.errors:
            return None
        return CompiledRuleSet(
            name=self.rule_set.metadata.name,
            file=self.file,
            conditions=tuple(c for c in conditions if c),
            filters=tuple(f for f in filters if f),
            scores=tuple(s for s in scores if s),
            source=self.rule_set,
        )

    def _check_unique(self, kinds: Sequence[str], what: str) -> None:
        """Each repeated name is reported where it repeats (filters and scores share one namespace)."""
        seen: set[str] = set()
        for kind in kinds:
            items: Sequence[MatchCondition | Variable | Filter | Score] = getattr(self.rule_set.spec, kind)
            for index, item in enumerate(items):
                if item.name in seen:
                    message = f"duplicate {what} name {item.name!r}: names must be unique in a rule set"
                    self.error(("spec", kind, index, "name"), item.name, message)
                seen.add(item.name)

    def _conditions(self) -> Iterator[CompiledCondition | None]:
        for index, condition in enumerate(self.rule_set.spec.matchConditions):
            loc = ("spec", "matchConditions", index, "expression")
            found = reads(condition.expression).names
            if not found <= _MATCH_READS:
                others = ", ".join(sorted(found - _MATCH_READS))
                message = f"match conditions may read only {_MATCH_LISTED}, not {others}"
                self.error(loc, condition.name, message, expression=condition.expression)
                continue
            program, _ = self.program(loc, condition.name, condition.expression, "bool")
            paths = self.paths(condition.expression)
            yield CompiledCondition(condition.name, program, paths, self.last_cost) if program else None

    def _filters(self) -> Iterator[CompiledFilter | None]:
        for index, rule in enumerate(self.rule_set.spec.filters):
            loc: tuple[str | int, ...] = ("spec", "filters", index)
            program, names = self.program((*loc, "expression"), rule.name, rule.expression, "bool")
            cost = self.last_cost
            message_program = None
            if rule.messageExpression:
                message_program, more = self.program(
                    (*loc, "messageExpression"), rule.name, rule.messageExpression, "string"
                )
                names |= more
                if message_program is None:
                    continue
                cost += self.last_cost
            if program is None:
                continue
            found = self.paths(rule.expression, rule.messageExpression or "")
            yield CompiledFilter(
                name=rule.name,
                program=program,
                message=rule.message or f"failed {rule.name}",
                message_program=message_program,
                resolvable=rule.resolvableByPreemption,
                ignore_errors=rule.failurePolicy == "Ignore",
                enforce=rule.mode == "Enforce",
                reads=names,
                paths=found,
                cost=cost,
            )

    def _scores(self) -> Iterator[CompiledScore | None]:
        for index, rule in enumerate(self.rule_set.spec.scores):
            loc = ("spec", "scores", index, "expression")
            program, names = self.program(loc, rule.name, rule.expression, "number")
            if program is None:
                continue
            yield CompiledScore(
                name=rule.name,
                program=program,
                weight=rule.weight,
                normalize=rule.normalize,
                enforce=rule.mode == "Enforce",
                reads=names,
                paths=self.paths(rule.expression),
                cost=self.last_cost,
            )


def compile_rule_set(
    rule_set: RuleSet, file: str, engine: Engine, line_of: LineOf
) -> tuple[CompiledRuleSet | None, list[LoadError]]:
    """The compiled rule set, or None with every error found in it."""
    compiler = _Compiler(rule_set, file, engine, line_of)
    compiled = compiler.compile()
    return compiled, compiler.errors + compiler.warnings
