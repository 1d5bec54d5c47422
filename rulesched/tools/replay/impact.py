"""`rulesched replay`: every recorded call decided again by new rules, and what that would change.

Each call of a recording is evaluated with the NEW rules on exactly the node contexts it saw, and
compared with a baseline: the decisions recorded (what the live rules answered), or the OLD rules
evaluated the same way. The impact counts pods, not calls (kube-scheduler retries a pod): a pod's
feasible set changed when any of its filter calls passes other nodes; it becomes unschedulable when a
filter call that let some node pass lets none; its top node changed when a prioritize call ranks another
node first (best score, ties by name). Rejections are counted per Enforce filter over every filter call.
A call the request deadline cut short is skipped (and counted) when compared with the recorded decisions:
what it answered was its rules' failurePolicy, not their decision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call as Asked
from rulesched.decide.verbs import Verb
from rulesched.recording_format import DecisionKeys
from rulesched.rules.book import RuleBook
from rulesched.rules.pod_values import pod_identity
from rulesched.tools.recording_read import Call

EXAMPLES = 10
"""The biggest changes the report shows."""
NODES_SHOWN = 10


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one call decided, as replay compares it."""

    passed: frozenset[str] = frozenset()
    scores: Mapping[str, int] = field(default_factory=dict)
    rejections: Counter[str] = field(default_factory=Counter)

    @property
    def top(self) -> str | None:
        if not self.scores:
            return None
        return min(self.scores.items(), key=lambda item: (-item[1], item[0]))[0]


def recorded(call: Call) -> Verdict:
    """The verdict the live rules gave, as recorded."""
    decision = call.decision
    if call.verb == "prioritize":
        return Verdict(scores=dict(decision.get(DecisionKeys.SCORES) or {}))
    rejections = Counter(decision.get(DecisionKeys.REJECTIONS) or {})
    return Verdict(frozenset(decision.get(DecisionKeys.PASSED) or ()), rejections=rejections)


def decided(book: RuleBook, call: Call) -> Verdict:
    """The verdict of `book` for the call, on the node contexts it saw, at the time it was made."""
    filters = call.verb == Verb.FILTER
    verb = Verb.FILTER if filters else Verb.PRIORITIZE
    asked = Asked(call.pod, call.contexts, verb, call.now, namespace=call.namespace, estimate=call.estimate)
    decision = evaluate(prepared(book), asked)
    if not filters:
        return Verdict(scores={name: node.score or 0 for name, node in decision.nodes.items()})
    failures = decision.failures()
    rejections = Counter({f"{rs}/{rule}": n for (rs, rule, enforce), n in failures.items() if enforce})
    return Verdict(frozenset(decision.passed), rejections=rejections)


@dataclass
class Impact:
    """What the new rules change over the calls replayed."""

    requests: Counter[str] = field(default_factory=Counter)
    pods: set[str] = field(default_factory=set)
    feasible_changed: set[str] = field(default_factory=set)
    unschedulable: set[str] = field(default_factory=set)
    schedulable_again: set[str] = field(default_factory=set)
    top_changed: set[str] = field(default_factory=set)
    before: Counter[str] = field(default_factory=Counter)
    after: Counter[str] = field(default_factory=Counter)
    changes: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    """(size, order, example) of every change; the biggest are shown."""

    def add(self, call: Call, before: Verdict, after: Verdict) -> None:
        identity = pod_identity(call.pod)
        pod = f"{identity['namespace']}/{identity['name']}"
        self.requests[call.verb] += 1
        self.pods.add(pod)
        if call.verb == "filter":
            self._filter(pod, before, after)
        elif before.top != after.top:
            self.top_changed.add(pod)
            example = {"pod": pod, "verb": "prioritize", "topBefore": before.top, "topAfter": after.top}
            self._change(1, example)

    def _filter(self, pod: str, before: Verdict, after: Verdict) -> None:
        self.before.update(before.rejections)
        self.after.update(after.rejections)
        if before.passed == after.passed:
            return
        self.feasible_changed.add(pod)
        lost, gained = sorted(before.passed - after.passed), sorted(after.passed - before.passed)
        unschedulable = bool(before.passed) and not after.passed
        if unschedulable:
            self.unschedulable.add(pod)
        if after.passed and not before.passed:
            self.schedulable_again.add(pod)
        example = {
            "pod": pod,
            "verb": "filter",
            "lost": lost[:NODES_SHOWN],
            "gained": gained[:NODES_SHOWN],
            "unschedulable": unschedulable,
        }
        # An unschedulable pod outranks any number of lost nodes.
        self._change(len(lost) + len(gained) + (1_000_000 if unschedulable else 0), example)

    def _change(self, size: int, example: dict[str, Any]) -> None:
        self.changes.append((size, len(self.changes), example))
        if len(self.changes) > 4 * EXAMPLES:  # bounded: keep the biggest, in the order they came
            self.changes = sorted(self.changes, key=lambda c: (-c[0], c[1]))[:EXAMPLES]

    def examples(self) -> list[dict[str, Any]]:
        return [c[2] for c in sorted(self.changes, key=lambda c: (-c[0], c[1]))[:EXAMPLES]]

    def counts(self) -> dict[str, int]:
        """The numbers `--fail-on` can test, by name."""
        return {
            "pods": len(self.pods),
            "feasible_changed": len(self.feasible_changed),
            "unschedulable": len(self.unschedulable),
            "schedulable_again": len(self.schedulable_again),
            "top_node_changed": len(self.top_changed),
        }

    def rejections(self) -> list[dict[str, Any]]:
        """Per rule, nodes rejected before and after; the biggest moves first."""
        rules = set(self.before) | set(self.after)
        rows = [{"rule": r, "before": self.before[r], "after": self.after[r]} for r in rules]
        return sorted(rows, key=lambda row: (-abs(row["after"] - row["before"]), row["rule"]))


def replay(calls: Iterable[Call], new: RuleBook, baseline: RuleBook | None) -> Impact:
    """The impact of `new` over `calls`, against `baseline` (None: the recorded decisions)."""
    impact = Impact()
    for call in calls:
        if call.verb not in ("filter", "prioritize"):
            continue
        if baseline is None and call.decision.get(DecisionKeys.DEADLINE_EXCEEDED):
            impact.requests["skipped"] += 1  # its rules did not all run: the recorded answer is no baseline
            continue
        before = recorded(call) if baseline is None else decided(baseline, call)
        impact.add(call, before, decided(new, call))
    return impact
