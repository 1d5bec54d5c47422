"""The nudge thread of `--requeue`: which nudges are sent, and when (the write itself: `writes/nudge.py`).

Nudges wait in a bounded queue (one per pod, the latest wins) and are sent from one background thread
(`BackgroundLoop`), paced by a token bucket (`--requeue-rate`, `--requeue-burst`). A nudge whose pod the
owner no longer wants (asked about again, seen bound, expired) is dropped from the queue unsent, reported
`dropped`. A nudge is not sent again by itself (the next change may send another); after a 403, a 429 or a
failure the thread pauses, doubling up to 10 s. Each outcome is logged once per change of state: a missing
permission is one warning, not one per pod.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Protocol

from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, Outcome
from rulesched.controllers.requeue.memory import TokenBucket
from rulesched.writes.nudge import Nudge, NudgeOutcome, NudgeWriter

log = logging.getLogger(__name__)

_PAUSED = Backoff(0.5, 10.0)
"""Pauses after 429s or failures in a row."""
_IDLE = 1.0
"""Most seconds the thread waits for a nudge, or for a token, before it looks again (a nudge queued wakes it)."""


class Owner(Protocol):
    """Who queues nudges: it says which pods it still wants nudged, and hears every outcome (in the nudge
    thread) with the API's reason ("" when patched)."""

    def wanted(self, key: str) -> bool: ...

    def report(self, nudge: Nudge, outcome: NudgeOutcome, reason: str) -> None: ...


class Nudger:
    """Sends queued nudges from its own thread, at most `rate` a second; `report` hears every outcome."""

    def __init__(self, api: Any, bucket: TokenBucket, owner: Owner, *, kept: int, timeout: float = 5.0) -> None:
        self._writer = NudgeWriter(api, timeout=timeout)
        self._bucket, self._owner, self._kept = bucket, owner, kept
        self._queue: OrderedDict[str, Nudge] = OrderedDict()
        self._lock = threading.Condition()
        self._state: NudgeOutcome | None = None
        self._failures = 0
        self._resume = 0.0
        """No nudge is sent before this `time.monotonic()` (a pause after refusals)."""
        self.loop = BackgroundLoop(self._step, LoopOptions("rulesched-requeue", interrupt=self._wake))

    def submit(self, nudge: Nudge) -> None:
        """Queue `nudge` (replacing a queued one for the same pod); the oldest is dropped past `kept`."""
        with self._lock:
            self._queue.pop(nudge.key, None)
            self._queue[nudge.key] = nudge
            while len(self._queue) > self._kept:
                self._queue.popitem(last=False)
            self._lock.notify()

    def queued(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def send(self, nudge: Nudge) -> tuple[NudgeOutcome, str, Nudge]:
        """Send `nudge` now, in the calling thread (`NudgeWriter.send`)."""
        return self._writer.send(nudge)

    def _wake(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def _step(self) -> Outcome:
        """Drop the nudges no longer wanted; send the next when the bucket has a token and no pause after
        refusals is under way."""
        self._drop_unwanted()
        with self._lock:
            if not self._queue:
                self._lock.wait(_IDLE)
                return "ok"
        wait = max(self._bucket.wait(), self._resume - time.monotonic())
        if wait > 0:
            with self._lock:
                self._lock.wait(min(wait, _IDLE))
            return "ok"
        with self._lock:
            if not self._queue or not self._bucket.take():
                return "ok"
            _, nudge = self._queue.popitem(last=False)
        outcome, reason, nudge = self.send(nudge)
        self._note(outcome, reason)
        self._owner.report(nudge, outcome, reason)
        if outcome in ("forbidden", "throttled", "failed"):
            self._failures += 1
            self._resume = time.monotonic() + _PAUSED.pause(self._failures)
        else:
            self._failures = 0
        return "ok"

    def _drop_unwanted(self) -> None:
        """Forget the queued nudges whose pods the owner no longer wants (asked about again, bound, expired):
        they are reported `dropped`, never sent."""
        with self._lock:
            dropped = [nudge for key, nudge in self._queue.items() if not self._owner.wanted(key)]
            for nudge in dropped:
                del self._queue[nudge.key]
        for nudge in dropped:
            self._owner.report(nudge, "dropped", "the pod is no longer waiting")

    def _note(self, outcome: NudgeOutcome, reason: str) -> None:
        """Log a change of state once: the first refusal of a kind, and the return to working nudges."""
        before, self._state = self._state, outcome
        if outcome == before or outcome in ("gone", "conflict", "raced", "dropped"):
            if outcome != "patched":
                log.debug("requeue nudge %s: %s", outcome, reason)
            return
        if outcome == "patched":
            if before is not None:
                log.info("requeue: nudges are accepted again")
        elif outcome == "forbidden":
            log.warning(
                "requeue: the API refused a nudge (%s); is deploy/overlays/requeue/ applied? "
                "Pods wait for kube-scheduler's own retry until it is", reason
            )  # fmt: skip
        else:
            log.warning("requeue: a nudge %s (%s); the next change may nudge again", outcome, reason)
