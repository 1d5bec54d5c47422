"""Evicting a pod through the Eviction API, and the Event that says why.

An eviction is one POST of a policy/v1 Eviction to `/api/v1/namespaces/{ns}/pods/{name}/eviction`, with the
pod's uid as a precondition (a pod re-created under the same name is never evicted by mistake), so that
PodDisruptionBudgets hold: the API server refuses with 429 while a budget forbids it. The answer is read raw,
as for a binding. Every answer is data (`Outcome`): 201 `evicted`, 429 `blocked` (a PodDisruptionBudget, or
the API server shedding load: tried again after the cool-down), 404 `gone`, 403 `forbidden` (RBAC: the
deschedule overlay is not applied), 409 `conflict` (the uid changed), anything else `error`.

After an eviction, a core/v1 Event on the pod names the rule set, the filter and its message.
"""

from __future__ import annotations

import datetime
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes.client import CoreV1Api, V1DeleteOptions, V1Eviction, V1ObjectMeta, V1Preconditions

from rulesched.cluster.kube.access import finish
from rulesched.cluster.kube.errors import ApiError, api_errors

log = logging.getLogger(__name__)

Outcome = Literal["evicted", "blocked", "gone", "forbidden", "conflict", "error"]
_BY_STATUS: dict[int, Outcome] = {429: "blocked", 404: "gone", 403: "forbidden", 409: "conflict"}
COMPONENT = "rulesched"


@dataclass(frozen=True, slots=True)
class Answer:
    """What the API answered to one eviction: the outcome and its message ("" on success)."""

    outcome: Outcome
    message: str = ""


class ApiEvicter:
    """Evicts pods and records Events through the Kubernetes API."""

    def __init__(self, api: Any, *, identity: str = COMPONENT, timeout: float = 10.0) -> None:
        self._core = CoreV1Api(api)
        self._identity = identity
        self._timeout = timeout

    def evict(self, namespace: str, name: str, uid: str, *, timeout: float | None = None) -> Answer:
        """Ask the API to evict the pod; blocks up to `timeout` (at most the evicter's own)."""
        body = V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=V1ObjectMeta(name=name, namespace=namespace),
            delete_options=V1DeleteOptions(preconditions=V1Preconditions(uid=uid or None)),
        )
        try:
            with api_errors():
                response = self._core.create_namespaced_pod_eviction(
                    name, namespace, body, _preload_content=False, _request_timeout=min(self._timeout, timeout or 1e9)
                )
            finish(response)
        except ApiError as error:
            return Answer(_BY_STATUS.get(error.status, "error"), error.message)
        except Exception as error:  # connection refused, timeout: tried again after the cool-down
            return Answer("error", f"{type(error).__name__}: {error}")
        return Answer("evicted")

    def record_event(self, namespace: str, name: str, uid: str, message: str) -> str:
        """A Normal Event `Descheduled` on the pod saying `message`; "" when written, else why not."""
        now = datetime.datetime.now(datetime.UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body: Any = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{secrets.token_hex(8)}", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace, "uid": uid},
            "reason": "Descheduled",
            "message": message[:1024],
            "type": "Normal",
            "action": "Evict",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._identity,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            with api_errors():
                response = self._core.create_namespaced_event(
                    namespace, body, _preload_content=False, _request_timeout=self._timeout
                )
            finish(response)
        except Exception as error:  # the eviction happened; a missing Event is logged, not retried
            return f"{type(error).__name__}: {error}"
        return ""
