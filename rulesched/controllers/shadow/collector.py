"""The cyclic garbage collector kept off the live answers while the shadow rules compare a burst.

Python's collector runs a young collection whenever 700 more container objects have been made than freed,
and every tenth of them also looks at the objects that survived the young ones since. A call waiting for its
comparison holds what it needs (its pod, its candidates, the live outcome: some thirty containers and lists as
long as the candidates), so a burst queued behind the live answers makes the collector run again and again,
each collection walking every waiting call's lists: at 1000 nodes, 1 to 4 ms, in whatever call is being
answered then (or right after it: `extender/after.py` pays the collection a call owes once its answer is sent,
before the next call is read).

So while calls wait for their comparison, no young collection falls due (`Held`: the collector's first
threshold is set out of reach). The calls are freed by reference counting once compared; when the queue is
empty, the threshold is set back and the young collection owed is paid then, between calls, over what is
left (what the burst cached, and any cyclic garbage made meanwhile). What `serve` froze at start-up stays
frozen. Held for at most `--shadow-queue` calls queued in a row: under a load that never lets the queue
empty, the collector runs as usual.
"""

from __future__ import annotations

import gc

from rulesched.handoff.idle import collect_owed

HELD_THRESHOLD = 1 << 30
"""The collector's first threshold while calls wait: out of reach (0 would turn automatic collection off, and
`extender/after.py` would read it as a collection owed after every answer)."""


class Held:
    """Holds the collector's young collections off while the shadow queue has calls (`hold`), until it empties
    (`release`); for at most `bound` calls queued in a row."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.queued = 0
        """Calls queued since the queue was last empty."""
        self.thresholds: tuple[int, int, int] | None = None
        """The collector's thresholds before the hold, while one is on."""

    def hold(self) -> None:
        """A call was queued: no young collection falls due while it waits. Past `bound` calls queued without
        the queue emptying, the collector runs as usual again."""
        self.queued += 1
        if self.queued > self.bound:
            self._end()
        elif self.thresholds is None:
            self.thresholds = gc.get_threshold()
            gc.set_threshold(HELD_THRESHOLD, *self.thresholds[1:])

    def release(self) -> None:
        """The queue is empty: the thresholds set back, and the young collection owed paid now."""
        self._end()
        self.queued = 0

    def _end(self) -> None:
        if self.thresholds is None:
            return
        gc.set_threshold(*self.thresholds)
        self.thresholds = None
        if gc.isenabled():
            collect_owed()
