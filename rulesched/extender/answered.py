"""A filter or prioritize call as it was decided, handed on once its answer is sent.

The shadow evaluation (`shadow.py`) and the recording (`recording.py`) both work from an `Answered`: the
pod, the node contexts the decision saw (frozen snapshots, so another thread may read them), the
namespace, the time the rules saw as `now` and the live Decision. Building one costs nothing but
references. The recording is written in a worker thread, only while no request is being read or answered
(`Idle`); the shadow comparison is made on the event loop in the gaps between requests when it is small
work, and in its own worker thread, under the same condition, when it is not (`shadow.py`).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Mapping, Sequence
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


QUIET_SECONDS = 0.002
"""How long no request must have been answered before a worker thread starts a piece of work: kube-scheduler
sends prioritize right after filter's answer, and work started in between would hold the interpreter lock
when it arrives (a waiting thread gets it only after the switch interval, 5 ms)."""


class Idle:
    """Whether the extender is reading or answering a request right now (how many), and since when it is not.

    Changed on the event loop only, by the connections (`busy` at a request's first byte, `done` once its
    answer is sent); the shadow comparisons on the event loop look at it before each slice, and worker
    threads wait on it before each piece of work, so that their CPU time (Python threads share one
    interpreter lock) falls between requests."""

    def __init__(self) -> None:
        self.active = 0
        self.event = threading.Event()
        self.event.set()
        self.last = 0.0
        """When the last request was answered (`time.monotonic()`)."""
        self.gap = 0.0
        """How long it was from the answer before the latest request to that request's first byte (seconds)."""
        self.began = 0.0
        """When the latest request's first byte was read (`time.monotonic()`)."""
        self.woken: list[Callable[[], None]] = []
        """Called once no request is being read or answered (`when_idle`), then forgotten."""

    def busy(self) -> None:
        if not self.active:
            self.began = time.monotonic()
            self.gap = self.began - self.last
        self.active += 1
        self.event.clear()

    def done(self) -> None:
        self.active -= 1
        self.last = time.monotonic()
        if self.active <= 0:
            self.active = 0
            self.event.set()
            if self.woken:
                woken, self.woken = self.woken, []
                for call in woken:
                    call()

    def when_idle(self, call: Callable[[], None]) -> None:
        """Call `call` (on the event loop) once no request is being read or answered: a wait without a timer
        polling meanwhile (uvloop runs a timer due in under half a millisecond at once, and one set again and
        again would spin)."""
        self.woken.append(call)

    def wait(self, stopping: threading.Event) -> bool:
        """Wait until no call is being answered and none was for `QUIET_SECONDS`; False when `stopping` was
        set meanwhile."""
        while not stopping.is_set():
            if not self.event.wait(0.1):
                continue
            quiet = self.last + QUIET_SECONDS - time.monotonic()
            if quiet <= 0:
                return True
            time.sleep(quiet)
        return False
