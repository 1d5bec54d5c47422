"""The moments between requests: whether one is being read or answered (`Idle`, kept by the connections), and
the young collection the garbage collector owes, paid in those moments (`collect_owed`).

What is done after an answer (the shadow comparisons, the recording) waits for these moments, so that its
CPU time falls between kube-scheduler's calls rather than in them.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

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


def collect_owed() -> None:
    """The young collection the collector would have run by now, if it owes one (a count past its threshold),
    run now: after an answer (`extender/after.py`'s `AfterAnswer`), and once the shadow queue empties
    (`controllers/shadow/collector.py`)."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    if counts[0] >= thresholds[0]:  # else the collector owes nothing yet: it would not have run
        gc.collect(1 if counts[1] >= thresholds[1] else 0)
