"""One background loop for every poller and watcher: a daemon thread, capped backoff with jitter, a status.

A source hands `BackgroundLoop` a `step` (one list-and-watch, one poll) and says how long to rest after
a step that went well. The loop runs the step again and again in its own thread until `stop()`; a step
that raises is a failure: it is described, recorded in the status and followed by a pause that doubles
with every failure in a row up to a cap, shortened by a random part (jitter) so that many replicas
restarting together do not retry in step. A step may also end without an error but ask for a pause
("short": it ended too soon to be healthy) or for one free immediate retry ("retry": e.g. a relist after
410 Gone). The status (state, last success, last error) is one frozen object swapped by reference, so
any thread may read it; `on_change` hears every change of state, so each source logs an outage once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

log = logging.getLogger(__name__)

Outcome = Literal["ok", "short", "retry"]
"""How a step ended without raising: "ok" (rest `interval`), "short" (back off), "retry" (again at once, once)."""
State = Literal["starting", "ok", "failing"]


@dataclass(frozen=True)
class Backoff:
    """Pauses after failures in a row: `initial`, doubling, capped at `maximum`, minus up to `jitter` of it."""

    initial: float
    maximum: float
    jitter: float = 0.2
    """The fraction of a pause that may randomly be cut off (0: exact pauses)."""

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` failures in a row, before jitter."""
        return float(min(self.maximum, self.initial * 2 ** max(0, failures - 1)))

    def pause(self, failures: int) -> float:
        """The jittered pause after `failures` failures in a row."""
        return self.delay(failures) * (1.0 - self.jitter * random.random())


@dataclass(frozen=True)
class LoopStatus:
    """What a loop can tell about its source (for /readyz, logs and Prometheus)."""

    state: State
    """"starting" before any step ended, "ok" after a success, "failing" after a failure."""
    last_success: float | None = None
    """When the source last worked (POSIX seconds); None before the first success."""
    last_error: str = ""
    """What the failure under way says ("" unless failing)."""
    running: bool = False
    """The thread is alive."""


def describe(error: BaseException) -> str:
    """An error as one line: its type and message."""
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class LoopOptions:
    """How a loop paces itself and reports."""

    name: str
    """The thread's name and the loop's name in logs."""
    interval: float = 0.0
    """Seconds to rest after a step that went well."""
    backoff: Backoff = Backoff(0.2, 10.0)
    describe: Callable[[BaseException], str] = describe
    """How a failure reads in the status and logs."""
    on_change: Callable[[LoopStatus, LoopStatus], None] | None = None
    """Called with the status before and after each change of state."""
    interrupt: Callable[[], None] | None = None
    """Wakes a step blocked on I/O, from the thread calling stop()."""
    join_timeout: float = 5.0
    """How long stop() waits for the thread to end."""


class BackgroundLoop:
    """Runs `step` in a daemon thread until stopped, pacing and recording its outcomes."""

    def __init__(self, step: Callable[[], Outcome], options: LoopOptions) -> None:
        self._step = step
        self._options = options
        self._status = LoopStatus("starting")
        self._failures = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        """stop() was called: a step should return as soon as it can."""
        return self._stopping.is_set()

    def status(self) -> LoopStatus:
        thread = self._thread
        return replace(self._status, running=thread is not None and thread.is_alive())

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._options.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._options.interrupt is not None:
            self._options.interrupt()
        if self._thread is not None:
            self._thread.join(self._options.join_timeout)

    def run_once(self) -> Outcome | None:
        """One step now, in the calling thread, recorded like the loop's own; None when it failed."""
        try:
            outcome = self._step()
        except Exception as error:  # any failure of a source only means "try again later"
            if not self.stopping:
                self.failed(self._options.describe(error))
            return None
        if outcome == "ok":
            self.succeeded()
        return outcome

    def succeeded(self) -> None:
        """Record that the source works (a step may say so before it ends, e.g. once a watch connects)."""
        self._record(LoopStatus("ok", last_success=time.time()))

    def failed(self, message: str) -> None:
        """Record a failure that says `message`."""
        self._record(LoopStatus("failing", self._status.last_success, message))

    def _record(self, after: LoopStatus) -> None:
        with self._lock:
            before, self._status = self._status, after
        if before.state == after.state:
            if after.state == "failing":
                log.debug("%s: still failing: %s", self._options.name, after.last_error)
        elif self._options.on_change is not None:
            self._options.on_change(before, after)

    def _run(self) -> None:
        while not self.stopping:
            self._stopping.wait(self._pause(self.run_once()))

    def _pause(self, outcome: Outcome | None) -> float:
        """Seconds to rest after a step that ended with `outcome` (None: it failed)."""
        if outcome == "ok":
            self._failures = 0
            return self._options.interval
        self._failures += 1
        if outcome == "retry" and self._failures == 1:
            return 0.0  # the retry is the recovery; only failing again right away earns a pause
        return self._options.backoff.pause(self._failures)
