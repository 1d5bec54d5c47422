"""The nudge: one JSON merge patch of the `rulesched.io/requeue` annotation on a pending pod, which
kube-scheduler takes as an update of the pod and so retries it (docs/operations/requeue.md).

Nudges wait in a bounded queue (one per pod, the latest wins) and are sent from one background thread
(`BackgroundLoop`), paced by a token bucket (`--requeue-rate`, `--requeue-burst`). The patch carries the
pod's uid as a precondition, so a pod re-created under the same name is never touched (409). An answer is
an outcome, never an exception: `patched`, `forbidden` (403: the overlay's RBAC or admission policy is
missing), `gone` (404: the pod was deleted), `conflict` (409, or 422: another pod has the name now),
`throttled` (429), `failed` (a timeout, a
5xx, no connection). A failed nudge is not sent again (the next change may send another); after a 403, a
429 or a failure the thread pauses, doubling up to 10 s. Each outcome is logged once per change of state: a
missing permission is one warning, not one per pod.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes.client import CoreV1Api

from rulesched.cluster.errors import (
    ApiError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    TooManyRequestsError,
    api_errors,
)
from rulesched.cluster.kube import finish
from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, Outcome
from rulesched.cluster.requeue import ANNOTATION, TokenBucket

log = logging.getLogger(__name__)

FIELD_MANAGER = "rulesched"
"""The patch's fieldManager: the API server records the nudge in managedFields under this name, the one entry
the requeue admission policy lets change (deploy/overlays/requeue/admission-policy.yaml)."""
NudgeOutcome = Literal["patched", "forbidden", "gone", "conflict", "throttled", "failed"]
_PAUSED = Backoff(0.5, 10.0)
"""Pauses after 429s or failures in a row."""
_IDLE = 1.0
"""Most seconds the thread waits for a nudge, or for a token, before it looks again (a nudge queued wakes it)."""


@dataclass(frozen=True, slots=True)
class Nudge:
    """One patch to send: the pod, the annotation's value, the change's kind and time, the node that passes."""

    key: str
    namespace: str
    name: str
    uid: str
    value: str
    kind: str
    changed: float
    """When the change happened (`time.monotonic()`): the nudge delay's start."""
    node: str


Report = Callable[[Nudge, NudgeOutcome, str], None]
"""Told each nudge's outcome and the API's reason ("" when patched), in the nudge thread."""


def patch_body(nudge: Nudge) -> dict[str, Any]:
    """The JSON merge patch: the annotation, and the uid as a precondition."""
    metadata: dict[str, Any] = {"annotations": {ANNOTATION: nudge.value}}
    if nudge.uid:
        metadata["uid"] = nudge.uid
    return {"metadata": metadata}


def _classify(error: ApiError) -> NudgeOutcome:
    if isinstance(error, ForbiddenError):
        return "forbidden"
    if isinstance(error, NotFoundError):
        return "gone"
    if isinstance(error, ConflictError) or error.status == 422:
        return "conflict"  # 422: the uid precondition failed (a uid is immutable): another pod has the name
    if isinstance(error, TooManyRequestsError):
        return "throttled"
    return "failed"


class Nudger:
    """Sends queued nudges from its own thread, at most `rate` a second; `report` hears every outcome."""

    def __init__(self, api: Any, bucket: TokenBucket, report: Report, *, kept: int, timeout: float = 5.0) -> None:
        self._core = CoreV1Api(api)
        self._bucket, self._report, self._kept, self._timeout = bucket, report, kept, timeout
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

    def _wake(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def _step(self) -> Outcome:
        """Send the next nudge when the bucket has a token and no pause after refusals is under way."""
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
        outcome, reason = self.send(nudge)
        self._note(outcome, reason)
        self._report(nudge, outcome, reason)
        if outcome in ("forbidden", "throttled", "failed"):
            self._failures += 1
            self._resume = time.monotonic() + _PAUSED.pause(self._failures)
        else:
            self._failures = 0
        return "ok"

    def send(self, nudge: Nudge) -> tuple[NudgeOutcome, str]:
        """One patch now, in the calling thread: its outcome and the API's reason."""
        try:
            with api_errors():
                response = self._core.patch_namespaced_pod(
                    nudge.name, nudge.namespace, patch_body(nudge), _preload_content=False,
                    field_manager=FIELD_MANAGER, _request_timeout=self._timeout,
                    _content_type="application/merge-patch+json",
                )  # fmt: skip
            finish(response)
        except ApiError as error:
            return _classify(error), f"{error.status}: {error.message}"
        except Exception as error:  # a timeout, no connection: the next change may nudge again
            return "failed", f"{type(error).__name__}: {error}"
        return "patched", ""

    def _note(self, outcome: NudgeOutcome, reason: str) -> None:
        """Log a change of state once: the first refusal of a kind, and the return to working nudges."""
        before, self._state = self._state, outcome
        if outcome == before or outcome in ("gone", "conflict"):
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
