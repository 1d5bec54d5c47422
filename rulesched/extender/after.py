"""The work after the answer: what a filter or prioritize call does once its answer is sent (`AfterAnswer`), and
the garbage collector paused while a call is answered (`NoCollection`), resumed once its answer is on its way.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable

from starlette.background import BackgroundTask
from starlette.responses import Response

from rulesched.handoff.idle import collect_owed

log = logging.getLogger(__name__)


class AfterAnswer(BackgroundTask):
    """What a filter or prioritize call does once its answer is sent (Starlette runs a response's `background`
    right after its last byte is written, and the event loop reads no other call before it is done): each
    step in turn (count the pod on the node ranked first, log and count the decision, count the request, hand
    the call on to the shadow book), then free the request, turn the collector back on and pay the young
    collection the request owes. kube-scheduler waits for none of it. A step that fails is logged and the
    next still runs: the answer is out, nothing can change it."""

    def __init__(self, garbage: list[object], steps: list[Callable[[], None]]) -> None:
        # Not BackgroundTask's own: its `func` and `args` go unused (`__call__` is this class's), and its
        # inspection of `func` cost 1 µs a call.
        self.garbage, self.steps = garbage, steps

    async def __call__(self) -> None:
        for step in self.steps:
            try:
                step()
            except Exception:
                log.exception("internal error after an answer was sent")
        # Collected last, once the call's objects are freed: they would survive into the older generation,
        # whose collections would then take longer (a few every thousand calls, past the next call's arrival).
        self.steps.clear()
        self.garbage.clear()
        gc.enable()
        collect_owed()


Resume = Callable[..., Response]


class NoCollection:
    """No garbage collection while a request is answered; it resumes once the answer is sent.

    Decoding a request allocates up to millions of objects (full mode), each of which counts toward
    the collector's thresholds; collections in the middle of it scan everything cached and cost tens of
    milliseconds, while almost all of those objects are freed by reference counting when the request ends.
    The block wraps its answer with the function it is given, so that the collection it owes runs after
    the answer is on its way (kube-scheduler does not wait for it), and then the `steps` it is given to run
    after the answer (log the decision, hand the call on to the shadow book: `AfterAnswer`); on an error it
    resumes at once. If an answer is never sent, the next one turns the collector back on. What the function
    is also given (`garbage`: the decoded request, say) is freed then too: in full mode that is millions of
    objects, whose freeing would otherwise delay the answer by milliseconds.
    """

    __slots__ = ("deferred",)

    def __init__(self) -> None:
        self.deferred = False

    def __enter__(self) -> Resume:
        gc.disable()
        return self.resume_after

    def resume_after(self, response: Response, garbage: list[object], *steps: Callable[[], None] | None) -> Response:
        response.background, self.deferred = AfterAnswer(garbage, [step for step in steps if step is not None]), True
        return response

    def __exit__(self, *failure: object) -> None:
        if not self.deferred:
            gc.enable()
