"""The pace of the shadow comparisons (`Pace`): how long their slices take and how long the gaps between calls
last, as recently seen, so that a slice starts soon after an answer (`AFTER_ANSWER_SECONDS`) only where it
should end before the next call (`controller.py` makes the slices); and the shadow thread's share of the
interpreter lock (`switching_often`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rulesched.handoff.idle import Idle

CALM_SECONDS = 0.002
"""After an answer, slices are made only where they are expected to end before the next call arrives (`Pace`),
until the next call is overdue (later than the gap expected, and at least this long after the answer): then as
they come."""
CALM_MAX_SECONDS = 0.016
"""How long after an answer the next call may come before it is overdue, at most: the least (`CALM_SECONDS`)
doubles each time a call arrived during a slice, until the queue empties (`Pace.settled`)."""
AFTER_ANSWER_SECONDS = 0.0015
"""No slice starts sooner than this after an answer, however long the gap expected: kube-scheduler is still
reading the answer and acting on it (on a control-plane node, perhaps beside the extender), and work of ours
then slows it (measured: the benchmark's prioritize p99 went from 1.1-1.5 x to 0.7-0.9 x of the server
without shadow rules, at 65 pods a second)."""
FIT = 0.5
"""The share of the gap expected before the next call that a slice may be expected to take."""
SWITCH_SECONDS = 0.0005
"""How long the shadow thread holds the interpreter lock, at most, while a call waits for it (Python's default
switch interval is 5 ms)."""
WAITED_SECONDS = 0.0001
"""A request read this soon after a slice ended had arrived during it (the event loop reads it as soon as the
slice returns): the gap it came after was shorter than it looks."""


class Pace:
    """How long the slices take and the gaps between calls last, as recently seen: a slice is made soon after an
    answer only where it is expected to end before the next call arrives, so that back-to-back calls are
    not delayed by the comparisons of the calls before them. The gap expected after an answer is the recent
    gaps after answers of its verb (kube-scheduler scores with its own plugins between filter and prioritize,
    binds and filters with its own between prioritize and the next filter): it follows a shorter one at once,
    a longer one slowly. A slice's expected time is the recent times of slices of its kind."""

    def __init__(self) -> None:
        self.gaps: dict[str, float] = {}
        self.times: dict[str, float] = {}
        self.last_verb: str | None = None
        self.slice = (0.0, 0.0)
        """When the last slice started and ended."""
        self.calm = CALM_SECONDS
        """How long after an answer the next call is overdue, at the least. On a busy machine the client pauses
        often (it waits for a core), each pause began slices as they came, and the call after the pause waited
        for the one under way (traced, back to back at 1000 nodes beside a process busy 8 ms in every 16: 74 and
        90 calls of 4000 read right after a slice; 43 and 51 with this). So each call that arrived during a
        slice doubles it, up to `CALM_MAX_SECONDS`; what the burst leaves is compared in the pause after it,
        and once the queue is empty (`settled`) the next burst starts from `CALM_SECONDS` again."""

    def answered(self, verb: str, idle: Idle) -> None:
        """A call of `verb` was answered; `idle` says how long the call before it had been answered when it came
        (`Idle.gap`). A call read right after a slice ended had waited for it: the slice had started too late,
        and the gap counts only up to its start."""
        gap = idle.gap
        started, ended = self.slice
        if ended > idle.began - idle.gap and idle.began - ended < WAITED_SECONDS:
            gap = max(0.0, started - (idle.began - idle.gap))
            self.calm = min(2 * self.calm, CALM_MAX_SECONDS)
        before = self.last_verb
        if before is not None:
            seen = self.gaps.get(before, gap)
            self.gaps[before] = gap if gap < seen else seen + (gap - seen) / 8
        self.last_verb = verb

    def _gap(self) -> float:
        """The gap expected before the next call: the recent gaps after answers of the last verb."""
        return self.gaps.get(self.last_verb or "", 0.0)

    def settled(self) -> None:
        """The queue is empty: the next burst's calls are overdue from `CALM_SECONDS` again."""
        self.calm = CALM_SECONDS

    def overdue(self, since: float) -> bool:
        """Whether the next call, `since` seconds after the answer, is later than expected (`calm` at the least):
        the gaps have grown, or the burst is over."""
        return since >= max(self.calm, self._gap())

    def next_look(self, since: float) -> float:
        """How long after the answer a slice that neither fits nor is overdue now, `since` seconds after it, may
        next: once `AFTER_ANSWER_SECONDS` have passed (a slice may fit then), or once the next call is overdue."""
        return AFTER_ANSWER_SECONDS if since < AFTER_ANSWER_SECONDS else max(self.calm, self._gap())

    def fits(self, kind: str, since: float) -> bool:
        """Whether a slice of `kind` is expected to end before the next call, `since` seconds after the answer
        (never sooner than `AFTER_ANSWER_SECONDS`)."""
        return since >= AFTER_ANSWER_SECONDS and self.times.get(kind, 0.0) <= FIT * self._gap() - since

    def took(self, kind: str, started: float, ended: float) -> None:
        """A slice of `kind` ran from `started` to `ended` (`time.monotonic()`)."""
        self.slice = (started, ended)
        seconds = ended - started
        expected = self.times.get(kind)
        # A slice the collector or a cold cache made long is not what the next one of its kind will take.
        self.times[kind] = seconds if expected is None else expected + (min(seconds, 2 * expected) - expected) / 4


@contextlib.contextmanager
def switching_often() -> Iterator[None]:
    """The interpreter lock handed over within `SWITCH_SECONDS` (not Python's 5 ms) while the shadow thread
    evaluates: a call that arrives meanwhile waits that long for the event loop's thread to get it, not 5 ms.
    The interval applies to the whole process; only the shadow thread sets it, and sets it back."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, SWITCH_SECONDS))
    try:
        yield
    finally:
        sys.setswitchinterval(before)
