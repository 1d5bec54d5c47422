"""The nudge: one JSON merge patch of the `rulesched.io/requeue` annotation on a pending pod, which
kube-scheduler takes as an update of the pod and so retries it (docs/operations/requeue.md).

Nudges wait in a bounded queue (one per pod, the latest wins) and are sent from one background thread
(`BackgroundLoop`), paced by a token bucket (`--requeue-rate`, `--requeue-burst`). A nudge whose pod the
owner no longer wants (asked about again, seen bound, expired) is dropped from the queue unsent. Each nudge
reads the pod first: one bound meanwhile is dropped, one re-created under the name (another uid) is never
touched, and the value written is never the one the pod holds (a patch that changes nothing is no update
for kube-scheduler). The patch carries the uid and the resourceVersion read as preconditions, so a 200 is a
change the API server applied to exactly the pod read: only that counts as `patched`. Every other answer
is an outcome, never an exception: `forbidden` (403: the overlay's RBAC or admission policy is missing),
`gone` (404: the pod was deleted), `conflict` (another pod has the name now, or 422 on the uid),
`raced` (409: the pod changed between the read and the patch), `throttled` (429), `failed` (a timeout, a
5xx, no connection), `dropped` (not sent: forgotten or bound). A nudge is not sent again by itself (the
next change may send another); after a 403, a 429 or a failure the thread pauses, doubling up to 10 s.
Each outcome is logged once per change of state: a missing permission is one warning, not one per pod.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

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
from rulesched.cluster.requeue import ANNOTATION, TokenBucket, change_id

log = logging.getLogger(__name__)

FIELD_MANAGER = "rulesched"
"""The patch's fieldManager: the API server records the nudge in managedFields under this name, the one entry
the requeue admission policy lets change (deploy/overlays/requeue/admission-policy.yaml)."""
NudgeOutcome = Literal["patched", "forbidden", "gone", "conflict", "raced", "throttled", "failed", "dropped"]
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


class Owner(Protocol):
    """Who queues nudges: it says which pods it still wants nudged, and hears every outcome (in the nudge
    thread) with the API's reason ("" when patched)."""

    def wanted(self, key: str) -> bool: ...

    def report(self, nudge: Nudge, outcome: NudgeOutcome, reason: str) -> None: ...


def patch_body(nudge: Nudge, version: str = "") -> dict[str, Any]:
    """The JSON merge patch: the annotation, and the uid and the resourceVersion read as preconditions."""
    metadata: dict[str, Any] = {"annotations": {ANNOTATION: nudge.value}}
    if nudge.uid:
        metadata["uid"] = nudge.uid
    if version:
        metadata["resourceVersion"] = version
    return {"metadata": metadata}


def other_value(value: str, current: object) -> str:
    """`value`, or when the pod holds it already another change id derived from it: the write is a change."""
    if value != current:
        return value
    kind, _, _ = value.partition(".")
    return change_id(kind, (value, "again"))


def _read_check(nudge: Nudge, pod: Mapping[str, Any]) -> NudgeOutcome | None:
    """Why the pod as read is not nudged (None: it is)."""
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if metadata.get("deletionTimestamp"):
        return "gone"
    if nudge.uid and metadata.get("uid") != nudge.uid:
        return "conflict"  # another pod has the name now
    if spec.get("nodeName"):
        return "dropped"  # bound meanwhile: kube-scheduler has nothing to retry
    return None


def _classify(error: ApiError) -> NudgeOutcome:
    if isinstance(error, ForbiddenError):
        return "forbidden"
    if isinstance(error, NotFoundError):
        return "gone"
    if isinstance(error, ConflictError):
        return "raced"  # the resourceVersion precondition: the pod changed since it was read
    if error.status == 422:
        return "conflict"  # the uid precondition failed (a uid is immutable): another pod has the name
    if isinstance(error, TooManyRequestsError):
        return "throttled"
    return "failed"


class Nudger:
    """Sends queued nudges from its own thread, at most `rate` a second; `report` hears every outcome."""

    def __init__(self, api: Any, bucket: TokenBucket, owner: Owner, *, kept: int, timeout: float = 5.0) -> None:
        self._core = CoreV1Api(api)
        self._bucket, self._owner, self._kept, self._timeout = bucket, owner, kept, timeout
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

    def send(self, nudge: Nudge) -> tuple[NudgeOutcome, str, Nudge]:
        """Read the pod, then patch it, now, in the calling thread: the outcome, the API's reason and the
        nudge as sent (its value never the one the pod held)."""
        try:
            with api_errors():
                pod = self._read(nudge)
                refused = _read_check(nudge, pod)
                if refused is not None:
                    return refused, f"the pod as read: {refused}", nudge
                metadata = pod.get("metadata") or {}
                current = (metadata.get("annotations") or {}).get(ANNOTATION)
                nudge = replace(nudge, value=other_value(nudge.value, current))
                response = self._core.patch_namespaced_pod(
                    nudge.name, nudge.namespace, patch_body(nudge, metadata.get("resourceVersion") or ""),
                    field_manager=FIELD_MANAGER, _preload_content=False, _request_timeout=self._timeout,
                    _content_type="application/merge-patch+json",
                )  # fmt: skip
            finish(response)
        except ApiError as error:
            return _classify(error), f"{error.status}: {error.message}", nudge
        except Exception as error:  # a timeout, no connection: the next change may nudge again
            return "failed", f"{type(error).__name__}: {error}", nudge
        return "patched", "", nudge

    def _read(self, nudge: Nudge) -> dict[str, Any]:
        response: Any = self._core.read_namespaced_pod(
            nudge.name, nudge.namespace, _preload_content=False, _request_timeout=self._timeout
        )
        try:
            pod: dict[str, Any] = json.loads(response.data)
        finally:
            response.release_conn()
        return pod

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
