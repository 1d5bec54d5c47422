"""What a call asks of the rules: its `Verb` (what runs) and the `Call` an evaluation is handed.

A verb is the extender verb's own name (a `StrEnum`: it is the label of metrics and logs as it is) and
knows what it runs: filters, scores or both. The evaluations read `verb.filters` and `verb.scores`, two
booleans fixed with the verb, so that no evaluation compares verbs.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rulesched.rules.context import NodeContext


class Verb(enum.StrEnum):
    """An extender verb, and what of the rules it runs."""

    filters: bool
    """The filters run: a node that fails an enforced one is rejected."""
    scores: bool
    """The scores run, over the nodes that pass (every node when the filters do not run)."""

    def __new__(cls, name: str, filters: bool, scores: bool) -> Verb:
        verb = str.__new__(cls, name)
        verb._value_ = name
        verb.filters, verb.scores = filters, scores
        return verb

    @classmethod
    def named(cls, name: str) -> Verb:
        """The verb called `name` (a recorded call's, say); ValueError for none."""
        for verb in cls:
            if verb.value == name:
                return verb
        raise ValueError(f"no verb {name!r}: one of {', '.join(cls)}")

    FILTER = "filter", True, False
    """kube-scheduler's filter: which candidates pass."""
    PRIORITIZE = "prioritize", False, True
    """kube-scheduler's prioritize: every candidate scored (they passed its filter already)."""
    PREEMPT = "preempt", True, False
    """kube-scheduler's preempt: which candidates would pass once their victims are gone."""
    EXPLAIN = "explain", True, True
    """Everything: the filters, then the scores of the nodes that pass (`POST /explain`, `rulesched explain`)."""


class Call(NamedTuple):
    """One evaluation asked of a rule book: the pod, its candidate nodes and the verb, and how to run it."""

    pod: Mapping[str, Any]
    nodes: Sequence[NodeContext]
    verb: Verb = Verb.EXPLAIN
    now: datetime.datetime | None = None
    """The time the rules see (`now`); the current time when None."""
    deadline: float | None = None
    """A `time.monotonic()` value past which the rules not yet evaluated follow their failurePolicy."""
    namespace: Mapping[str, Any] | None = None
    """The pod's Namespace object (`namespaceObject`), None when not known."""
    distinct: bool = False
    """No two of `nodes` have the same name (else a repeated one is evaluated once, as its first occurrence)."""
    names: Sequence[str] | None = None
    """The nodes' names in their order, when the caller has them (the request's own: the answer is made of them)."""
    estimate: Mapping[str, float] | None = None
    """What the pod will use (`estimate`); None: the default fallback, its requests."""
