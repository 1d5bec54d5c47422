"""What the shadow rules would have changed: one call compared, and the summary GET /shadow shows.

A filter call differs when the set of nodes that pass differs (reasons alone do not count: kube-scheduler
acts on the set); a prioritize call differs when any node's final score differs. A pod *would be
unschedulable* when the live rules let some node pass and the shadow rules none; its *top node changes*
when the node ranked first (ties by name) is another. Everything the summary keeps is bounded: counts,
rejections per rule (as many as there are rules), at most `EXAMPLES` examples and `PODS_COUNTED` pods.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import operator
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rulesched.decide.decision import Decision
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.pod_values import pod_identity

EXAMPLES = 10
"""Differing calls kept as examples (the first ones since the shadow book was loaded)."""
PODS_SHOWN = 100
"""Pods shown in the list of those that would be unschedulable."""
PODS_COUNTED = 10_000
"""Distinct pods that would be unschedulable, counted (and remembered) at most."""
NODES_SHOWN = 10
"""Differing nodes named in one example or log line (all are counted)."""


log = logging.getLogger("rulesched.decision")


def top_node(decision: Decision) -> str | None:
    """The node ranked first (best score, ties by name), or None when none passed or none was scored."""
    top = decision.top(1)
    return top[0][0] if top else None


def rejections(decision: Decision) -> Counter[str]:
    """Nodes rejected per Enforce filter, as `rule-set/rule`."""
    return Counter({f"{rs}/{rule}": n for (rs, rule, enforce), n in decision.failures().items() if enforce})


@dataclass(frozen=True, slots=True)
class Comparison:
    """One call decided by the live and by the shadow rules."""

    verb: str
    pod: dict[str, str]
    differing: int
    """How many nodes' outcome differs (filter: pass or fail; prioritize: final score)."""
    nodes: list[str]
    """The first `NODES_SHOWN` of them, in candidate order."""
    live_passed: int
    shadow_passed: int
    live_top: str | None
    shadow_top: str | None
    live_rejections: Counter[str] = field(default_factory=Counter)
    shadow_rejections: Counter[str] = field(default_factory=Counter)

    @property
    def differs(self) -> bool:
        return self.differing > 0

    @property
    def unschedulable(self) -> bool:
        """The live rules let a node pass, the shadow rules none."""
        return self.verb == "filter" and self.live_passed > 0 and self.shadow_passed == 0

    @property
    def top_changed(self) -> bool:
        return self.verb == "prioritize" and self.live_top != self.shadow_top

    def as_dict(self) -> dict[str, Any]:
        return {
            "verb": self.verb,
            "pod": self.pod,
            "nodesDiffering": self.differing,
            "nodes": self.nodes,
            "live": {"passed": self.live_passed, "top": self.live_top},
            "shadow": {"passed": self.shadow_passed, "top": self.shadow_top},
        }


class Live(NamedTuple):
    """What the comparison needs of a live decision (`live_side`), kept instead of the Decision while the call
    waits for its shadow decision: a few bytes a candidate, where the Decision holds the request's names."""

    verb: str
    passed: bytes
    """Each candidate passed (1) or not (0), in candidate order."""
    scores: list[int] | None
    """Prioritize: each candidate's final score."""
    top: str | None
    rejections: Counter[str]
    generation: int


def live_side(verb: str, decision: Decision) -> Live:
    """The live decision of a `verb` call, as `compare` compares it."""
    passed = decision.passed_flags()
    if verb == "filter":
        return Live(verb, passed, None, None, rejections(decision), decision.generation)
    return Live(verb, passed, decision.scores(), top_node(decision), Counter(), decision.generation)


def compare(pod: Mapping[str, Any], nodes: Sequence[NodeContext], live: Live, shadow: Decision) -> Comparison:
    """Compare the live and the shadow decision of one call over the same candidates `nodes`, in one order. C-level
    passes only: every call of a burst is compared, between calls."""
    theirs = shadow.passed_flags()
    passed = (live.passed.count(1), theirs.count(1))
    if live.verb == "filter":
        differing, names = _differing(nodes, live.passed, theirs)
        return Comparison(
            live.verb, pod_identity(pod), differing, names, *passed, None, None, live.rejections, rejections(shadow)
        )  # fmt: skip
    assert live.scores is not None
    differing, names = _differing(nodes, live.scores, shadow.scores())
    return Comparison(
        live.verb, pod_identity(pod), differing, names, *passed, live.top, top_node(shadow) if differing else live.top
    )  # fmt: skip


def _differing(nodes: Sequence[NodeContext], ours: Sequence[object], theirs: Sequence[object]) -> tuple[int, list[str]]:
    """How many of `nodes` have another outcome (`ours`, `theirs`: pass or fail, or final score, in their
    order), and the names of the first `NODES_SHOWN` of them."""
    if ours == theirs:
        return 0, []
    flags = list(map(operator.ne, ours, theirs))
    return flags.count(True), [node.name for node in itertools.islice(itertools.compress(nodes, flags), NODES_SHOWN)]


def _pod_name(pod: Mapping[str, str]) -> str:
    return f"{pod['namespace']}/{pod['name']}"


class Summary:
    """The comparisons since the shadow book was loaded; `add` from the shadow thread, `as_dict` from any."""

    def __init__(self, book: RuleBook | None) -> None:
        self._lock = threading.Lock()
        self.reset(book)

    def reset(self, book: RuleBook | None) -> None:
        """Start over for `book` (a new shadow book was loaded)."""
        with self._lock:
            self.book = book
            self.since = datetime.datetime.now(datetime.UTC)
            self.counts: dict[str, Counter[str]] = {"filter": Counter(), "prioritize": Counter()}
            self.live_rejections: Counter[str] = Counter()
            self.shadow_rejections: Counter[str] = Counter()
            self.unschedulable_calls = 0
            self.unschedulable: OrderedDict[str, dict[str, str]] = OrderedDict()
            self.top_changes = 0
            self.examples: list[dict[str, Any]] = []

    def dropped(self, verb: str) -> None:
        with self._lock:
            self.counts[verb]["dropped"] += 1

    def add(self, comparison: Comparison) -> None:
        with self._lock:
            self.counts[comparison.verb]["differs" if comparison.differs else "same"] += 1
            self.live_rejections.update(comparison.live_rejections)
            self.shadow_rejections.update(comparison.shadow_rejections)
            if comparison.unschedulable:
                self._unschedulable(comparison.pod)
            self.top_changes += comparison.top_changed
            if comparison.differs and len(self.examples) < EXAMPLES:
                self.examples.append(comparison.as_dict())

    def _unschedulable(self, pod: dict[str, str]) -> None:
        self.unschedulable_calls += 1
        key = _pod_name(pod)
        if key not in self.unschedulable and len(self.unschedulable) < PODS_COUNTED:
            self.unschedulable[key] = pod

    def _compared(self) -> dict[str, int]:
        """How much of the traffic was compared: the calls handed on, those compared, those dropped."""
        compared = sum(c["same"] + c["differs"] for c in self.counts.values())
        dropped = sum(c["dropped"] for c in self.counts.values())
        return {"calls": compared + dropped, "compared": compared, "dropped": dropped}

    def _headline(self) -> list[str]:
        """The summary in words, each count said "of N compared" so that a dropped share is not read as
        no difference."""
        filters, prioritize = self.counts["filter"], self.counts["prioritize"]
        filtered, ranked = filters["same"] + filters["differs"], prioritize["same"] + prioritize["differs"]
        seen = self._compared()
        return [
            f"{filters['differs']} of {filtered} filter calls compared pass other nodes",
            f"{len(self.unschedulable)} pods unschedulable ({self.unschedulable_calls} of {filtered} filter calls"
            " compared)",
            f"{self.top_changes} of {ranked} prioritize calls compared change their top node",
            f"{seen['compared']} of {seen['calls']} calls compared, {seen['dropped']} dropped",
        ]

    def as_dict(self) -> dict[str, Any]:
        """What GET /shadow shows."""
        with self._lock:
            book = self.book
            return {
                "book": None
                if book is None
                else {"generation": book.generation, "hash": book.hash, "loadedAt": book.loaded_at.isoformat()},
                "since": self.since.isoformat(),
                "comparisons": {
                    verb: {outcome: counts[outcome] for outcome in ("same", "differs", "dropped")}
                    for verb, counts in self.counts.items()
                },
                "compared": self._compared(),
                "headline": self._headline(),
                "unschedulable": {
                    "calls": self.unschedulable_calls,
                    "pods": len(self.unschedulable),
                    "examples": list(itertools.islice(self.unschedulable.values(), PODS_SHOWN)),
                },
                "topNodeChanges": self.top_changes,
                "rejections": {"live": dict(self.live_rejections), "shadow": dict(self.shadow_rejections)},
                "examples": list(self.examples),
            }


def log_difference(comparison: Comparison, live: int, shadow: int) -> None:
    """One decision-log line per differing call: the pod, the differing nodes, the top node under each."""
    if not log.isEnabledFor(logging.INFO):
        return
    pod = comparison.pod
    fields: dict[str, Any] = {
        "pod": pod,
        "verb": comparison.verb,
        "shadow": True,
        "nodesDiffering": comparison.differing,
        "nodes": comparison.nodes,
        "live": {"generation": live, "passed": comparison.live_passed, "top": comparison.live_top},
        "shadowBook": {"generation": shadow, "passed": comparison.shadow_passed, "top": comparison.shadow_top},
    }
    message = "shadow %s %s/%s differs on %d nodes"
    log.info(message, comparison.verb, pod["namespace"], pod["name"], comparison.differing, extra=fields)
