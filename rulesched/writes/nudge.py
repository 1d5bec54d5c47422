"""The nudge: one JSON merge patch of the `rulesched.io/requeue` annotation on a pending pod, which
kube-scheduler takes as an update of the pod and so retries it (docs/operations/requeue.md).

A nudge reads the pod first: one bound meanwhile is dropped, one re-created under the name (another uid) is
never touched, and the value written is never the one the pod holds (a patch that changes nothing is no
update for kube-scheduler). The patch carries the uid and the resourceVersion read as preconditions, so a
200 is a change the API server applied to exactly the pod read: only that counts as `patched`. Every other
answer is an outcome, never an exception: `forbidden` (403: the overlay's RBAC or admission policy is
missing), `gone` (404: the pod was deleted), `conflict` (another pod has the name now, or 422 on the uid),
`raced` (409: the pod changed between the read and the patch), `throttled` (429), `failed` (a timeout, a
5xx, no connection), `dropped` (not sent: forgotten or bound). What to nudge, and when, is the requeue
controller's (`controllers/requeue/`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from kubernetes.client import CoreV1Api

from rulesched.cluster.kube.access import finish
from rulesched.cluster.kube.errors import (
    ApiError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    TooManyRequestsError,
    api_errors,
)

ANNOTATION = "rulesched.io/requeue"
"""The annotation a nudge writes on the pending pod: the one field the admission policy lets rulesched change."""
FIELD_MANAGER = "rulesched"
"""The patch's fieldManager: the API server records the nudge in managedFields under this name, the one entry
the requeue admission policy lets change (deploy/overlays/requeue/admission-policy.yaml)."""
NudgeOutcome = Literal["patched", "forbidden", "gone", "conflict", "raced", "throttled", "failed", "dropped"]


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


def change_id(kind: str, parts: Sequence[object]) -> str:
    """The annotation's value for a change: its kind and a digest of what made the pod pass (the rules'
    hash, the node's name, resourceVersion and sample usage). The nudge writes another value when the pod
    holds this one already (`other_value`): a patch that changes nothing is no update."""
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:16]
    return f"{kind}.{digest}"


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


class NudgeWriter:
    """Sends one nudge through the Kubernetes API, in the calling thread."""

    def __init__(self, api: Any, *, timeout: float = 5.0) -> None:
        self._core = CoreV1Api(api)
        self._timeout = timeout

    def send(self, nudge: Nudge) -> tuple[NudgeOutcome, str, Nudge]:
        """Read the pod, then patch it, now: the outcome, the API's reason and the nudge as sent (its value
        never the one the pod held)."""
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
