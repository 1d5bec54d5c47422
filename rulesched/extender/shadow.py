"""Shadow rules: every answered filter and prioritize call decided again by a second rule book, and compared.

The shadow book has its own store (`--shadow-rules`, loaded, reloaded and kept last-good like `--rules`).
A call is handed over only after its answer was sent (`Answered`). Where its shadow decision is small
(the shadow book's caches answer it, or its estimated work is within `--shadow-inline-work`), it is made
right there, on the event loop, before any other call is read: a burst of back-to-back calls leaves no
pause to do it later, and a call kube-scheduler sends meanwhile waits for it no longer than for the
answer's own bookkeeping. Any other call waits in a bounded queue for the shadow thread, which works only
while no call is being answered (`Idle`): when `--shadow-queue` calls are waiting, the next comparison is
dropped and counted, never queued without limit. Either way the request deadline is the live call's; a
comparison cut short by it is dropped too.

The shadow evaluation sees exactly what the live one saw: the same pod, the same `now`, the same
namespace, the same node snapshots: the live node contexts themselves, which are immutable (their node,
metrics sample, pods and `recent` were taken when the live call was decided; a later poll or placement
makes new contexts and leaves these alone). What the engine derives from them is kept by each book's own
plan (`prepared(book)`), so the two books never share a cache; the shadow book's plan is used by one thread at
a time (`Shadow.evaluating`).
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
from contextlib import AbstractContextManager
from typing import Any

from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared, warm
from rulesched.decide.fast.budget import NeedsEvaluationError, within
from rulesched.decide.verbs import Call, Verb
from rulesched.extender.answered import Answered, Idle
from rulesched.extender.metrics import Metrics
from rulesched.extender.shadow_summary import NODES_SHOWN, Comparison, Summary, compare
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.store import RejectedReload, ReloadOutcome, RuleStore

log = logging.getLogger("rulesched.decision")

HOLD_SECONDS = 0.001
"""How long the comparisons held wait for a moment without another answer before they are made (once no
call is being answered): long enough for kube-scheduler to read the answer."""
HOLD_FILTER_SECONDS = 0.05
"""The same after a filter call: kube-scheduler sends prioritize as soon as its own plugins have scored, well
within this on a busy machine; a filter call without one (no node, or one node, passed) waits this long."""
HELD = 2
"""Comparisons held at most: a filter call's and its prioritize call's."""


THREAD_AFTER_SECONDS = 0.1
"""How long a queued call is left to the event loop, which compares it after an answer once it has become
small work (the refresh ahead warms the shadow book within tens of milliseconds of a poll or a reload),
before the shadow thread may take it in a pause: an evaluation under way in that thread holds the
interpreter lock against the calls that arrive meanwhile (5 ms each, the switch interval)."""


class Shadow:
    """The shadow book's store, its bounded queue and worker, and the summary of what it would change."""

    def __init__(
        self, store: RuleStore, idle: Idle, metrics: Metrics, *, capacity: int, deadline: float, inline_work: float
    ) -> None:
        self.store = store
        self.idle = idle
        self.metrics = metrics
        self.capacity = capacity
        self.deadline = deadline
        self.inline_work = inline_work
        """Estimated microseconds of shadow evaluation made right after an answer (`--shadow-inline-work`)."""
        self.evaluating = threading.Lock()
        """Held while the shadow book's plan evaluates: its caches are not shared between threads."""
        self.made: Counter[str] = Counter()
        """Comparisons made right after the answer (`afterAnswer`) and in the shadow thread (`thread`)."""
        self.summary = Summary(store.book)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rulesched-shadow")
        self.stopping = threading.Event()
        self.queue: deque[tuple[float, Answered]] = deque()
        """Answered calls waiting for their comparison, with when they were queued, oldest first (at most
        `capacity`)."""
        self.held: list[Answered] = []
        """The last calls answered, oldest first, while their comparison waits for a moment without answers
        (at most `HELD`; changed on the event loop only)."""
        self.holding = 0
        """Counts the calls held: a release armed for an earlier one is void."""
        self._lock = threading.Lock()
        store.listeners.append(self._reloaded)
        metrics.shadow_generation.set_function(lambda: store.book.generation if store.book else 0)
        metrics.shadow_queue.set_function(lambda: float(self.waiting()))

    def _reloaded(self, outcome: ReloadOutcome, book: RuleBook | None, rejected: RejectedReload | None) -> None:
        self.metrics.shadow_reloads.labels(outcome).inc()
        if outcome == "loaded":
            self.summary.reset(book)

    def submit(self, answered: Answered) -> None:
        """Take an answered call (on the event loop, once its answer is sent). Its comparison is held until a
        moment passes without another answer (`HOLD_SECONDS`; a filter call's `HOLD_FILTER_SECONDS`): made at
        once, it would take the CPU while kube-scheduler reads the answer (the two share the machine's
        cores), or sends the prioritize call that follows a filter call. Calls that come without such a
        moment (a burst) have the oldest held comparison made after each answer: `HELD` are held at most."""
        self.held.append(answered)
        while len(self.held) > HELD:
            self._hand(self.held.pop(0))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the event loop (an in-process caller): nothing to wait for
            self._release(self.holding)
            return
        self.holding += 1
        hold = HOLD_FILTER_SECONDS if answered.verb == "filter" else HOLD_SECONDS
        loop.call_later(hold, self._release, self.holding)

    def _release(self, holding: int) -> None:
        """No call was answered for a moment since the last one held: compare those held, once no call is
        being answered."""
        if holding != self.holding:
            return  # another call was answered since: its own release is armed
        if self.idle.active:
            asyncio.get_running_loop().call_later(HOLD_SECONDS, self._release, holding)
            return
        held, self.held = self.held, []
        for call in held:
            self._hand(call)

    def _hand(self, answered: Answered) -> None:
        """Compare the call now when that is small work, else queue it for the shadow thread (or drop it,
        counted, when the queue is full); then the oldest call queued, when that has become small work
        (the shadow book's caches warmed meanwhile: by the shadow thread, by the refresh ahead)."""
        if not self._now(answered):
            self._queue(answered)
        if self.queue:
            self._now(None)

    def _queue(self, answered: Answered) -> None:
        with self._lock:
            full = len(self.queue) >= self.capacity or self.stopping.is_set()
            if not full:
                self.queue.append((time.monotonic(), answered))
        if full:
            self._dropped(answered.verb)
            return
        with contextlib.suppress(RuntimeError):  # stopped meanwhile: shutting down, and `stop` drops what is queued
            self.executor.submit(self._run)

    def _dropped(self, verb: str) -> None:
        self.summary.dropped(verb)
        self.metrics.shadow_decision(verb, "dropped", {})

    def _now(self, answered: Answered | None) -> bool:
        """Compare right after the answer, on the event loop, when the shadow thread is not evaluating and the
        shadow decision is within `--shadow-inline-work`: `answered`, or (None) the oldest call queued, which
        stays first in the queue when it is not small work either. False: not compared (nothing counted)."""
        if self.stopping.is_set() or not self.evaluating.acquire(blocking=False):
            return False
        try:
            queued = None
            if answered is None:
                with self._lock:
                    if not self.queue:
                        return False
                    queued = self.queue.popleft()
                answered = queued[1]
            try:
                self._compare(answered, within(self.inline_work), "afterAnswer")
            except NeedsEvaluationError:
                if queued is not None:
                    with self._lock:
                        self.queue.appendleft(queued)
                return False
            except Exception:  # the answer is out; a comparison never fails the step after it
                log.exception("shadow evaluation of a %s call failed", answered.verb)
                self._dropped(answered.verb)
            return True
        finally:
            self.evaluating.release()

    def _run(self) -> None:
        """In the shadow thread: the oldest call queued compared, once it has waited `THREAD_AFTER_SECONDS` and
        no call has been answered for `QUIET_SECONDS` (none when the event loop compared them all)."""
        while True:
            if not self.idle.wait(self.stopping):
                return  # stopping: `stop` drops what is queued
            with self._lock:
                if not self.queue:
                    return
                young = self.queue[0][0] + THREAD_AFTER_SECONDS - time.monotonic()
            if young <= 0:
                break
            if self.stopping.wait(young):
                return
        with self.evaluating:
            with self._lock:
                if not self.queue:
                    return
                answered = self.queue.popleft()[1]
            try:
                self._compare(answered, contextlib.nullcontext(), "thread")
            except Exception:  # a comparison never takes the worker down; the live answer was sent long ago
                log.exception("shadow evaluation of a %s call failed", answered.verb)
                self._dropped(answered.verb)

    def _compare(self, answered: Answered, budget: AbstractContextManager[None], where: str) -> None:
        """Decide the call with the shadow book (within `budget`: it may raise `NeedsEvaluationError` before
        anything is counted) and count the comparison, and `where` it was made."""
        book = self.store.book
        live = answered.decision
        if book is None or live.deadline_exceeded:  # a call cut short says nothing about the rules
            self._dropped(answered.verb)
            return
        with budget:
            shadow = self._evaluate(book, answered.verb, answered, answered.contexts)
        if shadow.deadline_exceeded:
            self._dropped(answered.verb)
            return
        comparison = compare(answered.verb, answered.pod, live, shadow)
        self.summary.add(comparison)
        with self._lock:
            self.made[where] += 1
        failures = shadow.failures() if answered.verb == "filter" else {}
        self.metrics.shadow_decision(answered.verb, "differs" if comparison.differs else "same", failures)
        if comparison.differs:
            _log(comparison, live.generation, book.generation)

    def _evaluate(self, book: RuleBook, verb: str, answered: Answered, contexts: Sequence[NodeContext]) -> Decision:
        """The shadow decision of the call, in this thread, on the live call's node contexts."""
        deadline = time.monotonic() + self.deadline
        call = Call(
            answered.pod, contexts, Verb.named(verb), answered.now, deadline, answered.namespace,
            estimate=answered.estimate,
        )  # fmt: skip
        return evaluate(prepared(book), call)

    def prepare(self, nodes: Sequence[NodeContext]) -> None:
        """Give the nodes their memos for the shadow book, as the refresh ahead does for the live one (on the
        event loop, after a metrics poll or a reload), unless the shadow thread is evaluating: the comparisons
        of the calls that follow are then small work, made right after their answers."""
        book = self.store.book
        if book is None or not self.evaluating.acquire(blocking=False):
            return
        try:
            warm(prepared(book), nodes)
        finally:
            self.evaluating.release()

    async def explain(self, answered: Answered) -> Decision:
        """The shadow book's whole decision of a call (`POST /explain?book=shadow`), in the shadow thread."""
        book = self.store.book
        if book is None:
            raise LookupError("the shadow rules have not loaded")
        work = functools.partial(self._evaluate, book, "explain", answered, answered.contexts)
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._holding, work)

    def _holding(self, work: Callable[[], Decision]) -> Decision:
        with self.evaluating:
            return work()

    def status(self) -> dict[str, Any]:
        """What GET /shadow shows: the summary, the directory, the queue and the last rejected reload."""
        rejected = self.store.last_rejected
        return {
            "directory": [str(p) for p in self.store.paths],
            **self.summary.as_dict(),
            "queue": {"waiting": self.waiting(), "capacity": self.capacity},
            "made": {"afterAnswer": self.made["afterAnswer"], "thread": self.made["thread"]},
            "lastRejected": None
            if rejected is None
            else {"at": rejected.at.isoformat(), "errors": [e.as_dict() for e in rejected.errors]},
        }

    def waiting(self) -> int:
        """Calls not compared yet: those queued, and the filter call held."""
        return len(self.queue) + len(self.held)

    def stop(self) -> None:
        """Drop what is held and queued and let the worker end (a comparison under way finishes)."""
        self.stopping.set()
        held, self.held = self.held, []
        with self._lock:
            dropped = [answered for _, answered in self.queue] + held
            self.queue.clear()
        for answered in dropped:
            self._dropped(answered.verb)
        self.executor.shutdown(wait=False, cancel_futures=True)


def _log(comparison: Comparison, live: int, shadow: int) -> None:
    """One decision-log line per differing call: the pod, the differing nodes, the top node under each."""
    if not log.isEnabledFor(logging.INFO):
        return
    pod = comparison.pod
    fields: dict[str, Any] = {
        "pod": pod,
        "verb": comparison.verb,
        "shadow": True,
        "nodesDiffering": len(comparison.nodes),
        "nodes": comparison.nodes[:NODES_SHOWN],
        "live": {"generation": live, "passed": comparison.live_passed, "top": comparison.live_top},
        "shadowBook": {"generation": shadow, "passed": comparison.shadow_passed, "top": comparison.shadow_top},
    }
    message = "shadow %s %s/%s differs on %d nodes"
    log.info(message, comparison.verb, pod["namespace"], pod["name"], len(comparison.nodes), extra=fields)
