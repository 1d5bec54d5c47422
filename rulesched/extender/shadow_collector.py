"""The cyclic garbage collector kept off the live answers while the shadow rules compare a burst.

Python's collector runs a young collection whenever 700 more container objects have been made than freed,
and every tenth of them also looks at the objects that survived the young ones since. A call waiting for its
comparison holds what it needs (its pod, its candidates, the live outcome: some thirty containers and lists as
long as the candidates), so a burst queued behind the live answers makes the collector run again and again,
each collection walking every waiting call's lists: at 1000 nodes, 1 to 4 ms, in whatever call is being
answered then (or right after it: `extender/after.py` pays the collection a call owes once its answer is sent,
before the next call is read).

So while calls wait for their comparison, the objects made so far are moved out of the collector's generations
(`gc.freeze`, which also resets its counts: no collection is due) after each call is queued and after each
slice (`Held`). Everything waiting is freed by reference counting once compared, without the collector; when
the queue is empty, the held objects go back to the oldest generation (`gc.unfreeze`), where a full collection
finds whatever cyclic garbage was made meanwhile. Held for at most `--shadow-queue` calls queued in a row: under
a load that never lets the queue empty, the collector runs as usual.
"""

from __future__ import annotations

import gc


class Held:
    """Holds the objects made so far out of the collector's generations while the shadow queue has calls
    (`hold`), until it empties (`release`); for at most `bound` calls queued in a row."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.queued = 0
        """Calls queued since the queue was last empty."""
        self.frozen = False

    def hold(self, *, queued: bool) -> None:
        """Move every object made so far out of the collector's generations (and its counts to zero), after a
        call was `queued` or a slice was made. Past `bound` calls queued without the queue emptying, the
        collector gets back what it holds and runs as usual."""
        self.queued += queued
        if self.queued <= self.bound:
            gc.freeze()
            self.frozen = True
        elif self.frozen:
            gc.unfreeze()
            self.frozen = False

    def release(self) -> None:
        """The queue is empty: what was held goes back to the oldest generation."""
        if self.frozen:
            gc.unfreeze()
            self.frozen = False
        self.queued = 0
