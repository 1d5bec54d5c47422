"""A filter or prioritize call as it was decided, handed on once its answer is sent.

The shadow rules (`controllers/shadow/`) and the recording (`extender/recording.py`) both work from an
`Answered`: the pod, the node contexts the decision saw (frozen snapshots, so another thread may read them),
the namespace, the time the rules saw as `now` and the live Decision. Building one costs nothing but
references. The recording is written in a worker thread, only while no request is being read or answered
(`Idle`, `handoff/idle.py`); the shadow comparison is made on the event loop in the gaps between requests when
it is small work, and in its own worker thread, under the same condition, when it is not.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.decide.decision import Decision
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext


@dataclass(frozen=True, slots=True)
class Answered:
    """One answered filter or prioritize call: what the rules saw, and what they decided."""

    verb: str
    """`filter` or `prioritize`."""
    full: bool
    """Full mode (the request carried the nodes) rather than names mode."""
    pod: Mapping[str, Any]
    contexts: Sequence[NodeContext]
    unknown: Mapping[str, str]
    """Candidate names that could not be evaluated, with the reason answered for them."""
    namespace: Mapping[str, Any] | None
    now: datetime.datetime
    book: RuleBook
    decision: Decision
    estimate: Mapping[str, float] | None = None
    """The pod's `estimate` the rules saw (None: the fallback, its requests)."""
