"""Shadow rules: every answered filter and prioritize call decided again by a second rule book, and compared.

The shadow book has its own store (`--shadow-rules`, loaded, reloaded and kept last-good like `--rules`).
A call is handed over once its answer was sent (`Answered`), to a bounded queue (`--shadow-queue`: when it
is full, the call's comparison is dropped and counted, never queued without limit).

The event loop works the queue between calls, in slices: a slice is one call's shadow decision and its
comparison. A slice starts only while no request is being read or answered (`Idle`, kept by the connections: a
request counts from its first byte to its answer's last byte; a slice that finds one waits to be told it was
answered, `Idle.when_idle`), and a timer starts it, not the answer, so that a call kube-scheduler sent
meanwhile is read first. After an answer, a slice starts only once `AFTER_ANSWER_SECONDS` have passed
(kube-scheduler is reading the answer) and where it is expected to end before the next call arrives (`Pace`:
the slices' recent times against the recent gaps after answers of that verb), and once the next call is
overdue (`Pace.overdue`: later than those gaps, `CALM_SECONDS` at the least), as they come. The comparisons of
a burst of back-to-back calls wait in the queue for the gaps they fit in and the pause after the burst. The
queue keeps, of each call, what the shadow decision needs and the live decision's outcome (`Live`), not the
request; while calls wait, no young collection of the cyclic garbage collector falls due (`Held`,
`collector.py`), so that a queued burst makes no collections fall in the live answers.

A shadow decision that needs more than `--shadow-inline-work` of estimated work (the shadow book's caches
cold after a reload, a pod whose per-pod rules have not run, costly rules) is made smaller first: the call's
nodes are made ready for the shadow book, `WARM_NODES` a slice, and the call decided over them alone, so
that the book's caches keep its results on them (the refresh ahead hands over the nodes it makes ready for
the live book too, `prepare`, warmed the same way when nothing else waits). One still larger once all its
nodes had their turn (rules costlier than the budget on a few nodes) is left to the shadow thread,
which takes it once no request has been answered for a moment (`Idle.wait`): an evaluation in a thread
holds the interpreter lock against a call that arrives meanwhile, for up to half a millisecond
(`switching_often`; Python's default is 5 ms).

The shadow evaluation sees exactly what the live one saw: the same pod, the same `now`, the same
namespace, the same node snapshots: the live node contexts themselves, which are immutable (their node,
metrics sample, pods and `recent` were taken when the live call was decided; a later poll or placement
makes new contexts and leaves these alone). What the engine derives from them is kept by each book's own
plan (`prepared(book)`), so the two books never share a cache; the shadow book's plan is used by one thread at
a time (`Shadow.evaluating`). The request deadline is the live call's; a comparison cut short by it is
dropped, and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rulesched.controllers.shadow.collector import Held
from rulesched.controllers.shadow.metrics import ShadowMetrics
from rulesched.controllers.shadow.pace import AFTER_ANSWER_SECONDS, Pace, switching_often
from rulesched.controllers.shadow.queued import Queued, shadow_call
from rulesched.controllers.shadow.summary import Summary, compare, live_side, log_difference
from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared, warm
from rulesched.decide.fast.budget import NeedsEvaluationError, within
from rulesched.decide.verbs import Call, Verb
from rulesched.handoff.answered import Answered
from rulesched.handoff.idle import Idle
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.store import RejectedReload, ReloadOutcome, RuleStore

log = logging.getLogger("rulesched.decision")

BUSY_SECONDS = 0.001
"""How soon a slice is tried again when the shadow thread was evaluating, or at the soonest when it waits for
the calm (a poll while there is work queued, and only then): a millisecond, uvloop's timer resolution (a timer
due sooner runs at once, and one set again and again would spin). A slice that found a request being read or
answered waits to be told the request was answered (`Idle.when_idle`), without a poll."""
WARM_NODES = 8
"""Nodes made ready for the shadow book in one slice, when a call's shadow decision is too large for the event
loop (its caches cold: a reload, new nodes, a new pod): their memos (about 40 µs a node) and the call's results
on them."""


class Shadow:
    """The shadow book's store, its bounded queue, worked between calls, and the summary of what it would change."""

    def __init__(
        self,
        store: RuleStore,
        idle: Idle,
        metrics: ShadowMetrics,
        *,
        capacity: int,
        deadline: float,
        inline_work: float,
    ) -> None:
        self.store = store
        self.idle = idle
        self.metrics = metrics
        self.capacity = capacity
        self.deadline = deadline
        self.inline_work = inline_work
        """Estimated microseconds of one shadow decision made on the event loop (`--shadow-inline-work`)."""
        self.evaluating = threading.Lock()
        """Held while the shadow book's plan evaluates: its caches are not shared between threads."""
        self.made: Counter[str] = Counter()
        """Comparisons made on the event loop between calls (`betweenCalls`) and in the shadow thread (`thread`)."""
        self.summary = Summary(store.book)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rulesched-shadow")
        self.stopping = threading.Event()
        self.queue: deque[Queued] = deque()
        """Calls the event loop compares between calls, oldest first (changed on the event loop only)."""
        self.large: deque[Queued] = deque()
        """Calls whose shadow decision was still too large for the event loop once their nodes were made ready,
        oldest first: for the shadow thread. With `queue`, at most `capacity`."""
        self.deciding = 0
        """Calls the shadow thread took from `large` and has not compared yet (0 or 1)."""
        self.cold: deque[NodeContext] = deque()
        """Nodes to give their memos for the shadow book between calls (`prepare`; at most `capacity`)."""
        self.timer: asyncio.TimerHandle | None = None
        """The next slice's timer, while one is set."""
        self.parked = False
        """Waiting to be told that no request is being read or answered (`Idle.when_idle`)."""
        self.pace = Pace()
        self.held = Held(capacity)
        self._lock = threading.Lock()
        """Guards `large` (the event loop and the shadow thread both take from it), `deciding` and `made`."""
        store.listeners.append(self._reloaded)
        metrics.generation.set_function(lambda: store.book.generation if store.book else 0)
        metrics.queue.set_function(lambda: float(self.waiting()))

    def _reloaded(self, outcome: ReloadOutcome, book: RuleBook | None, rejected: RejectedReload | None) -> None:
        self.metrics.reloads.labels(outcome).inc()
        if outcome == "loaded":
            self.summary.reset(book)

    def submit(self, answered: Answered) -> None:
        """Take an answered call (once its answer is sent): queued, and compared in the gaps between calls
        (`_slice`); dropped and counted when `capacity` calls wait. Outside an event loop (an in-process
        caller), compared at once."""
        self.pace.answered(answered.verb, self.idle)
        if self.waiting() >= self.capacity or self.stopping.is_set() or answered.decision.deadline_exceeded:
            self._dropped(answered.verb)  # a call cut short says nothing about the rules
            return
        self.queue.append(Queued(shadow_call(answered), live_side(answered.verb, answered.decision)))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on an event loop: nothing to wait for
            while self.queue and self._slice():
                pass
            return
        self.held.hold()
        self._arm(loop, AFTER_ANSWER_SECONDS)  # an answer was just sent: no slice sooner

    def _arm(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        if self.timer is None:
            # A timer, not `call_soon`: a request that arrived meanwhile has a chance to be read and marked
            # (`Idle.busy`) first; one that arrives during the slice waits for it, and `Pace` counts that.
            self.timer = loop.call_later(delay, self._step)

    def _step(self) -> None:
        """One slice, unless a request is being read or answered; then the next, from a timer again."""
        self.timer = None
        if not (self.queue or self.cold) or self.stopping.is_set():
            self._emptied()
            return
        loop = asyncio.get_running_loop()
        idle, pace = self.idle, self.pace
        if idle.active:
            if not self.parked:
                self.parked = True
                idle.when_idle(self._unpark)
            return
        kind = self._next_kind()
        since = time.monotonic() - idle.last
        if not (pace.fits(kind, since) or pace.overdue(since)):
            self._arm(loop, max(pace.next_look(since) - since, BUSY_SECONDS))  # no sooner: uvloop would spin
            return
        started = time.monotonic()
        if not (self._slice() if self.queue else self._warm_cold()):
            self._arm(loop, BUSY_SECONDS)
            return
        pace.took(kind, started, time.monotonic())
        if self.queue or self.cold:
            self._arm(loop, 0.0)
        else:
            self._emptied()

    def _emptied(self) -> None:
        """Nothing waits: the collector's young collections and the calm of a new burst back (`Held`, `Pace`)."""
        self.held.release()
        self.pace.settled()

    def _unpark(self) -> None:
        """A request was answered: the next slice no sooner than `AFTER_ANSWER_SECONDS` from now."""
        self.parked = False
        if not self.stopping.is_set():
            self._arm(asyncio.get_running_loop(), AFTER_ANSWER_SECONDS)

    def _next_kind(self) -> str:
        """What the next slice does, as `Pace` tells slices apart."""
        return f"compare {self.queue[0].live.verb}" if self.queue else "warm"

    def _slice(self) -> bool:
        """The oldest queued call's shadow decision, within `--shadow-inline-work`, and its comparison. A decision
        larger than that is made smaller first, `WARM_NODES` of the call's nodes made ready for the shadow book a
        slice (`_warm`); one still larger once they all were goes to `large`. False: nothing done (the shadow
        thread is evaluating)."""
        if not self.evaluating.acquire(blocking=False):
            return False
        try:
            queued = self.queue[0]
            try:
                try:
                    with within(self.inline_work):
                        decision = self._decide(queued)
                except NeedsEvaluationError:
                    self._warm(queued)  # its own evaluation too: a failure drops the call, as one here does
                    return True
            except Exception:  # the answer is out; a comparison never fails the step after it
                self._failed(self.queue.popleft())
                return True
            self.queue.popleft()
            if decision is not None:
                self._compared(queued, decision, "betweenCalls")
            return True
        finally:
            self.evaluating.release()

    def _decide(self, queued: Queued) -> Decision | None:
        """The call's shadow decision. None, counted as dropped, for a call that says nothing of the rules (no
        shadow book, the shadow decision cut short by its deadline)."""
        book = self.store.book
        if book is not None:
            decision = self._evaluate(book, queued.call)
            if not decision.deadline_exceeded:
                return decision
        self._dropped(queued.live.verb)
        return None

    def _warm(self, queued: Queued) -> None:
        """The next `WARM_NODES` of a large call's nodes made ready for the shadow book: their memos, and the
        call decided over them alone, within `--shadow-inline-work` (what the book's caches keep of that
        decision, its per-pod results on these nodes, the whole decision finds). Once all had their turn, the
        call is tried whole again; still too large, it goes to `large`."""
        contexts, book = queued.call.nodes, self.store.book
        if book is None or queued.warmed >= len(contexts):
            self._enlarge(self.queue.popleft())
            return
        chunk = contexts[queued.warmed : queued.warmed + WARM_NODES]
        warm(prepared(book), chunk)
        with contextlib.suppress(NeedsEvaluationError), within(self.inline_work):
            self._evaluate(book, queued.call._replace(nodes=chunk))
        queued.warmed += WARM_NODES

    def _warm_cold(self) -> bool:
        """The next `WARM_NODES` nodes `prepare` kept given their memos for the shadow book. False: nothing done
        (the shadow thread is evaluating)."""
        book = self.store.book
        if book is None:
            self.cold.clear()
            return True
        if not self.evaluating.acquire(blocking=False):
            return False
        try:
            warm(prepared(book), [self.cold.popleft() for _ in range(min(WARM_NODES, len(self.cold)))])
        finally:
            self.evaluating.release()
        return True

    def _enlarge(self, queued: Queued) -> None:
        with self._lock:
            self.large.append(queued)
        with contextlib.suppress(RuntimeError):  # stopped meanwhile: shutting down, and `stop` drops what is queued
            self.executor.submit(self._run)

    def _failed(self, queued: Queued) -> None:
        log.exception("shadow evaluation of a %s call failed", queued.live.verb)
        self._dropped(queued.live.verb)

    def _dropped(self, verb: str) -> None:
        self.summary.dropped(verb)
        self.metrics.decision(verb, "dropped", {})

    def _run(self) -> None:
        """In the shadow thread: the oldest large call decided and compared, once no request has been answered
        for a moment (`Idle.wait`)."""
        if not self.idle.wait(self.stopping):
            return  # stopping: `stop` drops what is queued
        with self.evaluating, switching_often():
            with self._lock:
                if not self.large:
                    return
                queued = self.large.popleft()
                self.deciding += 1
            try:
                decision = self._decide(queued)
                if decision is not None:
                    self._compared(queued, decision, "thread")
            except Exception:  # a comparison never takes the worker down; the live answer was sent long ago
                self._failed(queued)
            finally:
                with self._lock:
                    self.deciding -= 1

    def _compared(self, queued: Queued, shadow: Decision, where: str) -> None:
        """Compare the call's live and shadow decisions and count the comparison, and `where` it was made (one
        that fails is counted as dropped: a comparison never fails what follows it)."""
        try:
            self._count(queued, shadow, where)
        except Exception:
            self._failed(queued)

    def _count(self, queued: Queued, shadow: Decision, where: str) -> None:
        call, live = queued.call, queued.live
        comparison = compare(call.pod, call.nodes, live, shadow)
        self.summary.add(comparison)
        with self._lock:
            self.made[where] += 1
        failures = shadow.failures() if live.verb == "filter" else {}
        self.metrics.decision(live.verb, "differs" if comparison.differs else "same", failures)
        if comparison.differs:
            log_difference(comparison, live.generation, shadow.generation)

    def _evaluate(self, book: RuleBook, call: Call) -> Decision:
        """The shadow decision of the call, in this thread, cut short at the request deadline from now."""
        return evaluate(prepared(book), call._replace(deadline=time.monotonic() + self.deadline))

    def prepare(self, nodes: Sequence[NodeContext]) -> None:
        """Give the nodes their memos for the shadow book, as the refresh ahead does for the live one (after a
        metrics poll or a reload): kept to be done between calls, `WARM_NODES` a slice, when no comparison is
        waiting (up to `--shadow-queue` nodes kept; the calls that find others cold warm them themselves)."""
        if self.store.book is None:
            return
        room = self.capacity - len(self.cold)
        self.cold.extend(nodes[:room])
        with contextlib.suppress(RuntimeError):  # not on an event loop: the next call arms it
            self._arm(asyncio.get_running_loop(), 0.0)

    async def explain(self, answered: Answered) -> Decision:
        """The shadow book's whole decision of a call (`POST /explain?book=shadow`), in the shadow thread."""
        book = self.store.book
        if book is None:
            raise LookupError("the shadow rules have not loaded")
        work = functools.partial(self._evaluate, book, shadow_call(answered)._replace(verb=Verb.EXPLAIN))
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._holding, work)

    def _holding(self, work: Callable[[], Decision]) -> Decision:
        with self.evaluating, switching_often():
            return work()

    def status(self) -> dict[str, Any]:
        """What GET /shadow shows: the summary, the directory, the queue and the last rejected reload."""
        rejected = self.store.last_rejected
        with self._lock:
            made = {"betweenCalls": self.made["betweenCalls"], "thread": self.made["thread"]}
        return {
            "directory": [str(p) for p in self.store.paths],
            **self.summary.as_dict(),
            "queue": {"waiting": self.waiting(), "capacity": self.capacity},
            "made": made,
            "lastRejected": None
            if rejected is None
            else {"at": rejected.at.isoformat(), "errors": [e.as_dict() for e in rejected.errors]},
        }

    def waiting(self) -> int:
        """Calls not compared yet (the one the shadow thread is deciding too)."""
        return len(self.queue) + len(self.large) + self.deciding

    def stop(self) -> None:
        """Drop what is queued and let the worker end (a comparison under way finishes)."""
        self.stopping.set()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        with self._lock:
            dropped = [*self.queue, *self.large]
            self.queue.clear()
            self.large.clear()
        for queued in dropped:
            self._dropped(queued.live.verb)
        self.held.release()
        self.executor.shutdown(wait=False, cancel_futures=True)
