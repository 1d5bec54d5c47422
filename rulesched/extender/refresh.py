"""Refresh ahead of requests: after a metrics poll or a rules reload, the nodes last asked about are made
ready again between requests, so that the next request does not pay for all of them.

A poll gives every node a new sample, so every candidate's context and every node-only rule that reads
`metrics` is stale at once; a reload makes every node-only result stale. Left alone, the next request
pays for its candidates' contexts and results (tens of milliseconds for 1000 nodes). The refresher
checks the sources' generations every `TICK` seconds on the event loop and, after a change, makes the
contexts and node-only results of the nodes last asked about again (`NodeContexts.for_names`,
`warm`; the shadow book's are handed to `Shadow.prepare`, which makes them ready between calls, a few a
slice, so that the comparisons stay small work), `CHUNK` nodes at a time, each step run on
the loop only while no evaluation is under way in the evaluation thread (the caches are never shared
between threads): a request that arrives meanwhile waits for one step at most (about a millisecond), and
finds done what was done.

A reload of the shadow rules alone leaves the live book's results alone: its nodes are only handed to
`Shadow.prepare` (the shadow book reloads as the live one does, and re-making every live result each time,
16 steps for 1000 nodes, would hold up the requests that arrive meanwhile for nothing).

Then the last prioritize call is evaluated again (after a poll or a live reload), as a request would (its
pod, its candidates), so that its verdicts under the new samples are kept: a prioritize verdict holds a
node's score, made for the range of the candidates' raw values, which a poll changes. The next call with
those candidates (the next replica, say) finds them; one with others computes its own. Like a request, it
is evaluated on the loop only within `--loop-work`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Sequence

from rulesched.decide.fast import evaluate, prepared, warm
from rulesched.decide.fast.budget import NeedsEvaluationError, within
from rulesched.decide.verbs import Call, Verb
from rulesched.extender.metrics import Metrics
from rulesched.extender.state import Extender

log = logging.getLogger(__name__)

TICK = 0.02
"""Seconds between two looks at the sources' generations: a few microseconds each."""
CHUNK = 64
"""Nodes made ready in one step on the event loop (about a millisecond of work)."""


class Refresher:
    """Makes the nodes a poll or a reload made stale ready again; run `run()` as a task."""

    def __init__(self, extender: Extender, metrics: Metrics | None = None) -> None:
        self.extender = extender
        self.metrics = metrics
        self.stopped = False
        self._seen = self._generations()

    def _generations(self) -> tuple[Hashable, int, int]:
        source, book, shadow = self.extender.cluster.metrics, self.extender.store.book, self.extender.shadow
        shadow_book = shadow.store.book if shadow is not None else None
        generations = (book.generation if book else 0), (shadow_book.generation if shadow_book else 0)
        return (source.generation() if source else 0), *generations

    async def run(self) -> None:
        """Refresh after every change until `stop()`; an unexpected error is logged, never raised."""
        while not self.stopped:
            await asyncio.sleep(TICK)
            try:
                await self.step()
            except Exception:
                log.exception("refreshing the node contexts ahead of requests failed; requests will do it")

    def stop(self) -> None:
        self.stopped = True

    async def step(self) -> int:
        """After a change of the metrics or the rules, the stale nodes made ready; how many were."""
        generations = self._generations()
        if generations == self._seen:
            return 0
        seen, self._seen = self._seen, generations
        reloaded = generations[1:] != seen[1:]
        live = generations[:2] != seen[:2]  # a poll or a live reload: the live book's results are stale too
        contexts = self.extender.contexts
        stale = contexts.take_stale()
        names = list(dict.fromkeys(contexts.current_names() + stale)) if reloaded else stale
        done = await self._refresh(names, live=live)
        if live:
            await self._prioritize_again()
        return done

    async def _refresh(self, names: Sequence[str], *, live: bool) -> int:
        """Make `names` ready: for the live book when `live` (else only the shadow book was reloaded, and the
        live book's results still hold), and handed to the shadow book."""
        done = 0
        for start in range(0, len(names), CHUNK):
            while self.extender.evaluating:  # the evaluation thread has the caches: wait for it
                await asyncio.sleep(0.001)
            found, _ = self.extender.contexts.for_names(names[start : start + CHUNK])
            if live:
                warm(prepared(self.extender.book()), found)
            if self.extender.shadow is not None:  # the shadow book's too: its comparisons follow the answers
                self.extender.shadow.prepare(found)
            done += len(found)
            await asyncio.sleep(0)  # let a request in
        if self.metrics is not None and done:
            self.metrics.refreshed.inc(done)
        return done

    async def _prioritize_again(self) -> None:
        """The last prioritize call evaluated again (nothing answered, logged or counted but this)."""
        extender = self.extender
        last = extender.last_prioritize
        if last is None:
            return
        while extender.evaluating:
            await asyncio.sleep(0.001)
        pod, names = last
        found, unknown = extender.contexts.for_names(names)
        if unknown:
            return
        try:
            with within(extender.settings.loop_work):
                book = extender.book()
                namespace, estimate = extender.namespace(pod), extender.estimate_for(book, pod)
                call = Call(pod, found, Verb.PRIORITIZE, None, None, namespace, True, names, estimate)
                evaluate(prepared(book), call)
        except NeedsEvaluationError:
            return  # more than a request may do on the loop: the next call computes its own
        if self.metrics is not None:
            self.metrics.refreshed_calls.inc()
