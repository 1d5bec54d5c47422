"""A Decision: everything one evaluation found, from which every answer is built.

The HTTP answers, `rulesched explain`, the decision log and `rulesched test` all read the same
Decision, so what explain shows is exactly what the scheduler got.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rulesched.rules.pod_values import pod_identity

Outcome = Literal["pass", "fail", "error", "skipped"]
Failures = Counter[tuple[str, str, bool]]
"""How many nodes each filter returned false for, by (rule set, rule, enforced)."""
Collected = Callable[["list[NodeDecision] | None"], "tuple[list[RuleError], Failures]"]
"""What `Decision.collect_later` is given: the errors and the counted failures of the verdicts reused, given
those of them that rejected their node when known (None: not known)."""
_COLLECTING = threading.Lock()
_NAME = operator.attrgetter("name")
_SCORE = operator.attrgetter("score")
_PASSED = operator.attrgetter("passed")
_REASON = operator.attrgetter("reason")
_RESOLVABLE = operator.attrgetter("resolvable")


_FLIPPED = bytes.maketrans(b"\x00\x01", b"\x01\x00")
"""Flags as bytes (0 or 1), each turned to the other."""
_FEW_TIED = 8
"""Up to this many nodes with one score, `Decision.top` finds them one `list.index` at a time (else with a pass
over all the scores)."""


def _no_none(scores: list[int | None]) -> bool:
    """Whether no score is None: `sum` fails on one, and adds integers in C several times as fast as `in`
    compares each to None."""
    try:
        sum(scores)  # type: ignore[arg-type]  # a None is what it looks for
    except TypeError:
        return False
    return True


def _positions(values: Sequence[Any], value: Any, count: int) -> list[int]:
    """Where `value` is in `values` (`count` times), in order (a C-level scan each)."""
    found, start = [], 0
    for _ in range(count):
        start = values.index(value, start) + 1
        found.append(start - 1)
    return found


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
    encoded: bytes | None = field(default=None, compare=False, repr=False)
    """Its part of a prioritize answer, kept by the extender once encoded (`wire.host_priorities`); a verdict
    kept by the rules is one node context's, answered under its name only."""

    def named(self, name: str) -> NodeDecision:
        """This verdict as `name`'s own copy, which scoring may fill in; its filter outcomes stay shared
        (never changed once made). Filter verdicts are shared by the nodes that fare alike."""
        return NodeDecision(
            name, self.passed, self.reason, self.resolvable, self.filters, list(self.scores), self.score
        )

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


class Decision:
    """The outcome of evaluating a rule book for one pod over its candidate nodes.

    The verdicts are kept as two lists side by side, the candidates' names and their verdicts, in candidate
    order: the answers are built from them with C-level passes (`passed`, `scores`). Filter verdicts may be
    shared by the nodes that fared alike (then they name no node); `nodes`, the verdicts by name, each with
    its node's name, is made only when something asks for it (explain, a RuleTest, the shadow comparison).
    """

    __slots__ = (
        "_all_passed",
        "_errors",
        "_exact",
        "_flags",
        "_later",
        "_nodes",
        "_rejecting",
        "_scores",
        "_shared",
        "_top",
        "applied",
        "counted_failures",
        "deadline_exceeded",
        "generation",
        "names",
        "verdicts",
    )

    def __init__(
        self,
        generation: int,
        applied: list[str],
        nodes: Mapping[str, NodeDecision] | None = None,
        errors: list[RuleError] | None = None,
    ) -> None:
        self.generation = generation
        self.applied = applied
        self._errors: list[RuleError] = errors if errors is not None else []
        self.counted_failures: Counter[tuple[str, str, bool]] | None = None
        """`failures()` as counted by the engine while collecting its cached verdicts; None: count them."""
        self._later: tuple[int, Collected, Sequence[NodeDecision]] | None = None
        """What the engine left to collect once asked (`collect_later`), where its errors go in `errors`, and the
        verdicts they are of."""
        self._rejecting: tuple[Sequence[NodeDecision], list[NodeDecision]] | None = None
        """The verdicts `outcome` read, and those of them that rejected their node."""
        self.deadline_exceeded = False
        """The request's deadline passed: rules not evaluated by then followed their failurePolicy."""
        self.names: list[str] = []
        self.verdicts: list[NodeDecision] = []
        self._nodes: dict[str, NodeDecision] | None = None
        self._shared = False
        self._scores: list[int] | None = None
        self._exact = False
        """`_scores` are the verdicts' own (no node without a score)."""
        self._all_passed = False
        """Every candidate passed (no filter ran: a prioritize call)."""
        self._flags: bytes | None = None
        """`passed_flags()`, once counted (by `outcome` for a filter answer)."""
        self._top: tuple[int, list[tuple[str, int]]] | None = None
        """The longest `top` asked so far, and what it found (the decision log asks for three, the shadow
        comparison for one)."""
        if nodes:
            self.nodes = dict(nodes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        mine = (self.generation, self.applied, self.nodes, self.errors, self.deadline_exceeded)
        return mine == (other.generation, other.applied, other.nodes, other.errors, other.deadline_exceeded)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"Decision(generation={self.generation}, applied={self.applied}, nodes={self.nodes}, errors={self.errors})"
        )

    @property
    def errors(self) -> list[RuleError]:
        """The rules that failed to evaluate, rule by rule, node by node (the reference's order)."""
        if self._later is not None:
            self._collect()
        return self._errors

    def collect_later(self, collected: Collected, verdicts: Sequence[NodeDecision]) -> None:
        """The engine's errors and counted failures from the `verdicts` it reused are found by `collected`,
        only when something asks (`errors`, `failures`): the extender asks once its answer is sent. The errors
        go where they would have gone now: before any added after this call."""
        self._later, self.counted_failures = (len(self._errors), collected, verdicts), None

    def _collect(self) -> None:
        later = self._later
        if later is None:
            return
        at, collected, verdicts = later
        # Those of the verdicts that rejected their node, when `outcome` found them already (in these verdicts).
        rejecting = self._rejecting[1] if self._rejecting is not None and self._rejecting[0] is verdicts else None
        errors, counted = collected(rejecting)  # of what was handed over: the same whichever thread asks first
        with _COLLECTING:
            if self._later is later:
                self._errors[at:at] = errors
                self.counted_failures, self._later = counted, None

    @property
    def nodes(self) -> dict[str, NodeDecision]:
        """Each candidate's verdict by name, in candidate order (made on first use, each verdict then the
        node's own, named)."""
        if self._nodes is None:
            if self._shared:
                self.verdicts = list(map(NodeDecision.named, self.verdicts, self.names))
                self._shared = False
            self._nodes = dict(zip(self.names, self.verdicts, strict=True))
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: dict[str, NodeDecision]) -> None:
        self.names, self.verdicts, self._nodes, self._shared = list(nodes), list(nodes.values()), nodes, False
        self._scores, self._all_passed, self._top, self._flags = None, False, None, None

    def set_verdicts(
        self, names: list[str], verdicts: list[NodeDecision], *, shared: bool = False, filtered: bool = True
    ) -> None:
        """The candidates' names and verdicts, in candidate order (no name twice); `shared`: the verdicts may be
        shared by several nodes and name none; not `filtered`: no filter ran, every candidate passed."""
        self.names, self.verdicts, self._nodes, self._shared, self._scores = names, verdicts, None, shared, None
        self._all_passed, self._top, self._flags = not filtered, None, None

    @property
    def passed(self) -> list[str]:
        """The names of the candidates that passed, in candidate order."""
        return list(itertools.compress(self.names, map(_PASSED, self.verdicts)))

    def outcome(self) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """The names of the candidates that passed, and the reasons of those that did not: by name, those that
        preemption may help (resolvable) and the others; in candidate order, with C-level passes."""
        flags = self._flags = bytes(map(_PASSED, self.verdicts))  # 1 for passed: flipped for the others in one C call
        passed = list(itertools.compress(self.names, flags))
        if len(passed) == len(flags):
            self._rejecting = (self.verdicts, [])
            return passed, {}, {}
        failing = flags.translate(_FLIPPED)
        verdicts = list(itertools.compress(self.verdicts, failing))
        self._rejecting = (self.verdicts, verdicts)
        reasons = dict(zip(itertools.compress(self.names, failing), map(_REASON, verdicts), strict=True))
        if None in reasons.values():  # a verdict rejects with its reason: kept for the type's sake
            reasons = {name: reason or "" for name, reason in reasons.items()}
        if not any(map(_RESOLVABLE, verdicts)):
            return passed, {}, reasons
        resolvable = list(map(_RESOLVABLE, verdicts))
        failed = {name: reasons[name] for name in itertools.compress(reasons, resolvable)}
        return passed, failed, {name: reason for name, reason in reasons.items() if name not in failed}

    def passed_flags(self) -> bytes:
        """Each candidate passed (1) or not (0), in candidate order: counted once (by `outcome`, for a filter
        answer), and not at all when no filter ran (a prioritize call: all passed)."""
        if self._flags is None:
            self._flags = b"\x01" * len(self.verdicts) if self._all_passed else bytes(map(_PASSED, self.verdicts))
        return self._flags

    def scores(self) -> list[int]:
        """Each candidate's score in candidate order, 0 for a node without one (kube-scheduler's reading);
        counted once, after the evaluation."""
        if self._scores is None:
            scores: list[int | None] = list(map(_SCORE, self.verdicts))
            # A prioritize call scores every candidate; otherwise one that did not pass has no score.
            self._exact = self._all_passed or _no_none(scores)
            if not self._exact:
                scores = [score or 0 for score in scores]
            self._scores = scores  # type: ignore[assignment]  # no None in it: replaced just above
        return self._scores  # type: ignore[return-value]

    def ranking(self) -> list[NodeDecision]:
        """Nodes that passed, best score first (ties by name, as a stable order)."""
        scored = [n for n in self.nodes.values() if n.passed and n.score is not None]
        # Two stable sorts with C-level keys (by name, then by score descending) order as the key
        # (-score, name) would, several times faster: explain and the decision log rank every call.
        return sorted(sorted(scored, key=_NAME), key=_SCORE, reverse=True)

    def top(self, count: int) -> list[tuple[str, int]]:
        """The names and scores of the first `count` of `ranking()`, without sorting every node (found once for
        the longest `count` asked)."""
        kept = self._top
        if kept is not None and (count <= kept[0] or len(kept[1]) < kept[0]):  # fewer than asked: all there are
            return kept[1][:count]
        found = self._find_top(count)
        self._top = (count, found)
        return found

    def _find_top(self, count: int) -> list[tuple[str, int]]:
        names: Sequence[str] = self.names
        counted = self.scores() if self._all_passed else None  # counting them sets `_exact`
        if counted is not None and self._exact:
            scores: Sequence[int] = counted  # every candidate scored (a prioritize call)
        else:
            scored = [
                (name, n.score)
                for name, n in zip(names, self.verdicts, strict=True)
                if n.passed and n.score is not None
            ]
            names, scores = [name for name, _ in scored], [score for _, score in scored]
        if not scores:
            return []
        # Scores are few distinct numbers (0 to 10), often tied at the top: the first `count` are found best
        # score first, each score's nodes by name, with C-level scans.
        first: list[tuple[str, int]] = []
        for value in sorted(set(scores), reverse=True):
            tied = scores.count(value)
            if tied <= _FEW_TIED:
                found = [names[i] for i in _positions(scores, value, tied)]
            else:
                found = list(itertools.compress(names, map(operator.eq, scores, itertools.repeat(value))))
            first.extend((name, value) for name in sorted(found)[: count - len(first)])
            if len(first) >= count:
                break
        return first

    def failures(self) -> Counter[tuple[str, str, bool]]:
        """How many nodes each filter returned false for, by (rule set, rule, enforced)."""
        if self._later is not None:
            self._collect()
        if self.counted_failures is not None:
            return Counter(self.counted_failures)
        return Counter((f.rule_set, f.rule, f.enforce) for n in self.verdicts for f in n.filters if f.outcome == "fail")

    def audit_rejections(self) -> list[FilterResult]:
        return [f for n in self.verdicts for f in n.filters if not f.enforce and f.outcome != "pass"]

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
