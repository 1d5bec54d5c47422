"""Shadow rules: every answered filter and prioritize call decided again by a second rule book, and compared.

The shadow book has its own store (`--shadow-rules`, loaded, reloaded and kept last-good like `--rules`).
A call is handed over only after its answer was sent (`Answered`), and waits in a bounded queue: when
`--shadow-queue` calls are waiting, the next comparison is dropped and counted, never queued without
limit. One worker thread evaluates, one call at a time, and only while no call is being answered
(`Idle`), with the request deadline as the live call's; a comparison cut short by it is dropped too.

The shadow evaluation sees exactly what the live one saw: the same pod, the same `now`, the same node
snapshots: the live node contexts themselves, which are immutable. What the engine derives from them is
kept by each book's own plan (`prepared(book)`), so the two books never share a cache, and the shadow book's
plan is only ever used by the shadow thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.extender.answered import Answered, Idle
from rulesched.extender.metrics import Metrics
from rulesched.extender.shadow_summary import NODES_SHOWN, Comparison, Summary, compare
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.store import RejectedReload, ReloadOutcome, RuleStore

log = logging.getLogger("rulesched.decision")


class Shadow:
    """The shadow book's store, its bounded queue and worker, and the summary of what it would change."""

    def __init__(self, store: RuleStore, idle: Idle, metrics: Metrics, *, capacity: int, deadline: float) -> None:
        self.store = store
        self.idle = idle
        self.metrics = metrics
        self.capacity = capacity
        self.deadline = deadline
        self.summary = Summary(store.book)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rulesched-shadow")
        self.stopping = threading.Event()
        self.pending = 0
        self._lock = threading.Lock()
        store.listeners.append(self._reloaded)
        metrics.shadow_generation.set_function(lambda: store.book.generation if store.book else 0)
        metrics.shadow_queue.set_function(lambda: float(self.pending))

    def _reloaded(self, outcome: ReloadOutcome, book: RuleBook | None, rejected: RejectedReload | None) -> None:
        self.metrics.shadow_reloads.labels(outcome).inc()
        if outcome == "loaded":
            self.summary.reset(book)

    def submit(self, answered: Answered) -> None:
        """Queue the comparison of an answered call, or drop it (counted) when the queue is full."""
        with self._lock:
            if self.pending >= self.capacity or self.stopping.is_set():
                full = True
            else:
                full, self.pending = False, self.pending + 1
        if full:
            self._dropped(answered.verb)
            return
        try:
            self.executor.submit(self._run, answered)
        except RuntimeError:  # stopped meanwhile: the server is shutting down
            with self._lock:
                self.pending -= 1
            self._dropped(answered.verb)

    def _dropped(self, verb: str) -> None:
        self.summary.dropped(verb)
        self.metrics.shadow_decision(verb, "dropped", {})

    def _run(self, answered: Answered) -> None:
        try:
            if not self.idle.wait(self.stopping):
                self._dropped(answered.verb)
                return
            self._compare(answered)
        except Exception:  # a comparison never takes the worker down; the live answer was sent long ago
            log.exception("shadow evaluation of a %s call failed", answered.verb)
            self._dropped(answered.verb)
        finally:
            with self._lock:
                self.pending -= 1

    def _compare(self, answered: Answered) -> None:
        book = self.store.book
        live = answered.decision
        if book is None or live.deadline_exceeded:  # a call cut short says nothing about the rules
            self._dropped(answered.verb)
            return
        shadow = self._evaluate(book, answered.verb, answered, answered.contexts)
        if shadow.deadline_exceeded:
            self._dropped(answered.verb)
            return
        comparison = compare(answered.verb, answered.pod, live, shadow)
        self.summary.add(comparison)
        failures = shadow.failures() if answered.verb == "filter" else {}
        self.metrics.shadow_decision(answered.verb, "differs" if comparison.differs else "same", failures)
        if comparison.differs:
            _log(comparison, live.generation, book.generation)

    def _evaluate(self, book: RuleBook, verb: str, answered: Answered, contexts: Sequence[NodeContext]) -> Decision:
        """The shadow decision of the call, in this thread, on the live call's node contexts."""
        deadline = time.monotonic() + self.deadline
        call = Call(answered.pod, contexts, Verb.named(verb), answered.now, deadline, answered.namespace)
        return evaluate(prepared(book), call)

    async def explain(self, answered: Answered) -> Decision:
        """The shadow book's whole decision of a call (`POST /explain?book=shadow`), in the shadow thread."""
        book = self.store.book
        if book is None:
            raise LookupError("the shadow rules have not loaded")
        work = functools.partial(self._evaluate, book, "explain", answered, answered.contexts)
        return await asyncio.get_running_loop().run_in_executor(self.executor, work)

    def status(self) -> dict[str, Any]:
        """What GET /shadow shows: the summary, the directory, the queue and the last rejected reload."""
        rejected = self.store.last_rejected
        return {
            "directory": [str(p) for p in self.store.paths],
            **self.summary.as_dict(),
            "queue": {"waiting": self.pending, "capacity": self.capacity},
            "lastRejected": None
            if rejected is None
            else {"at": rejected.at.isoformat(), "errors": [e.as_dict() for e in rejected.errors]},
        }

    def stop(self) -> None:
        """Drop what is queued and let the worker end (a comparison under way finishes)."""
        self.stopping.set()
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
