"""A Decision: everything one evaluation found, from which every answer is built.

The HTTP answers, `rulesched explain`, the decision log and `rulesched test` all read the same
Decision, so what explain shows is exactly what the scheduler got.
"""

from __future__ import annotations

import heapq
import operator
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rulesched.rules.context import pod_identity

Outcome = Literal["pass", "fail", "error", "skipped"]
_NAME = operator.attrgetter("name")
_SCORE = operator.attrgetter("score")


@dataclass(frozen=True, slots=True)
class FilterResult:
    rule_set: str
    rule: str
    outcome: Outcome
    enforce: bool
    message: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ruleSet": self.rule_set,
            "rule": self.rule,
            "outcome": self.outcome,
            "mode": "Enforce" if self.enforce else "Audit",
            "message": self.message,
            "error": self.error,
        }


@dataclass(slots=True)
class ScoreResult:
    """One score rule on one node. Not frozen: one is made per node per prioritize call, and frozen
    dataclasses take three times as long to construct."""

    rule_set: str
    rule: str
    enforce: bool
    weight: float
    raw: float | None
    normalized: float
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ruleSet": self.rule_set,
            "rule": self.rule,
            "mode": "Enforce" if self.enforce else "Audit",
            "weight": self.weight,
            "raw": self.raw,
            "normalized": self.normalized,
            "error": self.error,
        }


@dataclass(slots=True)
class NodeDecision:
    """One node's fate: whether it passed, why not, and each rule's outcome and score."""

    name: str
    passed: bool = True
    reason: str | None = None
    resolvable: bool = False
    filters: list[FilterResult] = field(default_factory=list)
    scores: list[ScoreResult] = field(default_factory=list)
    score: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "reason": self.reason,
            "resolvableByPreemption": self.resolvable if not self.passed else None,
            "filters": [f.as_dict() for f in self.filters],
            "scores": [s.as_dict() for s in self.scores],
            "score": self.score,
        }


@dataclass(frozen=True, slots=True)
class RuleError:
    """A rule that failed to evaluate on a node; counted and logged, never shown in a reason."""

    rule_set: str
    rule: str
    node: str | None
    error: str


@dataclass(slots=True)
class Decision:
    """The outcome of evaluating a rule book for one pod over its candidate nodes."""

    generation: int
    applied: list[str]
    nodes: dict[str, NodeDecision]
    errors: list[RuleError] = field(default_factory=list)
    counted_failures: Counter[tuple[str, str, bool]] | None = field(default=None, repr=False, compare=False)
    """`failures()` as counted by the engine while collecting its cached verdicts; None: count them."""
    deadline_exceeded: bool = False
    """The request's deadline passed: rules not evaluated by then followed their failurePolicy."""

    @property
    def passed(self) -> list[str]:
        return [name for name, node in self.nodes.items() if node.passed]

    def ranking(self) -> list[NodeDecision]:
        """Nodes that passed, best score first (ties by name, as a stable order)."""
        scored = [n for n in self.nodes.values() if n.passed and n.score is not None]
        # Two stable sorts with C-level keys (by name, then by score descending) order as the key
        # (-score, name) would, several times faster: explain and the decision log rank every call.
        return sorted(sorted(scored, key=_NAME), key=_SCORE, reverse=True)

    def top(self, count: int) -> list[NodeDecision]:
        """The first `count` of `ranking()`, without sorting every node."""
        scored = [n for n in self.nodes.values() if n.passed and n.score is not None]
        if not scored:
            return []
        # Scores are 0 to 10, so often tied at the top: the nodes with the best one usually suffice.
        best = max(map(_SCORE, scored))
        first = [n for n in scored if n.score == best]
        if len(first) >= count:
            return sorted(first, key=_NAME)[:count]
        return heapq.nsmallest(count, scored, key=lambda n: (-(n.score or 0), n.name))

    def failures(self) -> Counter[tuple[str, str, bool]]:
        """How many nodes each filter returned false for, by (rule set, rule, enforced)."""
        if self.counted_failures is not None:
            return Counter(self.counted_failures)
        return Counter(
            (f.rule_set, f.rule, f.enforce) for n in self.nodes.values() for f in n.filters if f.outcome == "fail"
        )

    def audit_rejections(self) -> list[FilterResult]:
        return [f for n in self.nodes.values() for f in n.filters if not f.enforce and f.outcome != "pass"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "appliedRuleSets": self.applied,
            "nodes": [n.as_dict() for n in self.nodes.values()],
            "ranking": [{"name": n.name, "score": n.score} for n in self.ranking()],
            "errors": [{"ruleSet": e.rule_set, "rule": e.rule, "node": e.node, "error": e.error} for e in self.errors],
            "deadlineExceeded": self.deadline_exceeded,
        }

    def explain(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """The explanation of this decision for `pod` (what /explain and `rulesched explain` show)."""
        return {"pod": pod_identity(pod), **self.as_dict()}
