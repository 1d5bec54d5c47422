"""What the loopback API (`tests/kubeapi.py`) answers to the descheduler's writes: Leases, Evictions, Events.

No recording of these exists in `tests/fixtures`: the answers follow kube-apiserver v1.32's shapes as its
API reference and source give them. A Lease is read, created (409 `AlreadyExists` when it exists) and
replaced with its `resourceVersion` (409 `Conflict` when another write came first). An Eviction (policy/v1)
deletes the pod (MODIFIED with a deletionTimestamp, then DELETED on the pod watch) and answers a `Status`
`Success` 201; a pod it does not know is a 404, a uid precondition that does not hold a 409, and a pod a
test protects answers 429 with the PodDisruptionBudget's message. Events are kept as created. A test can
make any of these answer 403 (the RBAC refusal) or another status on demand (`refuse`).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Handler = Any
"""The loopback API's request handler (`kubeapi._Handler`): its `api`, `_json` and request body."""

_PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    status = "Success" if code < 300 else "Failure"
    document = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status, "message": message}
    return document | {"reason": reason, "details": details or {}, "code": code}


@dataclass
class Writes:
    """The writes the loopback API received and what it will refuse; guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    leases: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    evictions: list[dict[str, Any]] = field(default_factory=list)
    """Every Eviction asked for, with the status answered (`answered`)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    protected: set[tuple[str, str]] = field(default_factory=set)
    """Pods (namespace, name) a PodDisruptionBudget protects: their evictions answer 429."""
    refusals: dict[str, int] = field(default_factory=dict)
    """By kind ("eviction", "lease", "event"): a status to answer every such request with."""
    stalls: dict[str, Callable[[], float]] = field(default_factory=dict)
    """By kind ("eviction", "lease"): how many seconds each such request waits before it is served (a slow API
    server; what it reads or writes is as of then)."""
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    def refuse(self, kind: str, status: int | None) -> None:
        with self.lock:
            if status is None:
                self.refusals.pop(kind, None)
            else:
                self.refusals[kind] = status

    def stall(self, kind: str, seconds: float | Callable[[], float]) -> None:
        """Requests of `kind` wait `seconds` (or what it answers, asked for each request) before they are served."""
        with self.lock:
            self.stalls[kind] = seconds if callable(seconds) else lambda: seconds

    def _wait(self, kind: str) -> None:
        with self.lock:
            seconds = self.stalls[kind]() if kind in self.stalls else 0.0
        if seconds:
            time.sleep(seconds)

    def protect(self, namespace: str, name: str) -> None:
        with self.lock:
            self.protected.add((namespace, name))

    def evicted(self) -> list[str]:
        """`namespace/name` of every pod evicted (answered 201), in order."""
        with self.lock:
            return [
                f"{e['metadata']['namespace']}/{e['metadata']['name']}" for e in self.evictions if e["answered"] == 201
            ]

    def lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.leases.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def _refused(self, kind: str, what: str) -> tuple[int, dict[str, Any]] | None:
        code = self.refusals.get(kind)
        if code is None:
            return None
        if code == 403:
            message = f'{what} is forbidden: User "system:serviceaccount:rulesched-system:rulesched" cannot do it'
            return 403, _status(403, "Forbidden", message)
        return code, _status(code, "Refused", f"refused on demand with {code}")


def _body(handler: Handler) -> Any:
    return json.loads(handler.rfile.read(int(handler.headers.get("Content-Length") or 0)) or b"{}")


def get_lease(handler: Handler, query: dict[str, str], namespace: str, name: str) -> None:
    writes: Writes = handler.api.writes
    writes._wait("lease")
    with writes.lock:
        refused = writes._refused("lease", f'leases.coordination.k8s.io "{name}"')
        lease = copy.deepcopy(writes.leases.get((namespace, name)))
    if refused is not None:
        handler._json(*refused)
    elif lease is None:
        message = f'leases.coordination.k8s.io "{name}" not found'
        handler._json(404, _status(404, "NotFound", message, {"name": name, "group": "coordination.k8s.io"}))
    else:
        handler._json(200, lease)


def create_lease(handler: Handler, query: dict[str, str], namespace: str) -> None:
    writes: Writes = handler.api.writes
    lease = _body(handler)
    name = lease["metadata"]["name"]
    with writes.lock:
        refused = writes._refused("lease", f'leases.coordination.k8s.io "{name}"')
        exists = (namespace, name) in writes.leases
        if refused is None and not exists:
            lease["metadata"].update(namespace=namespace, resourceVersion=str(next(writes._versions)))
            writes.leases[(namespace, name)] = lease
    if refused is not None:
        handler._json(*refused)
    elif exists:
        message = f'leases.coordination.k8s.io "{name}" already exists'
        handler._json(409, _status(409, "AlreadyExists", message, {"name": name, "kind": "leases"}))
    else:
        handler._json(201, lease)


def replace_lease(handler: Handler, query: dict[str, str], namespace: str, name: str) -> None:
    writes: Writes = handler.api.writes
    lease = _body(handler)
    with writes.lock:
        refused = writes._refused("lease", f'leases.coordination.k8s.io "{name}"')
        current = writes.leases.get((namespace, name))
        version = lease["metadata"].get("resourceVersion")
        fresh = current is not None and version == current["metadata"]["resourceVersion"]
        if refused is None and fresh:
            lease["metadata"].update(namespace=namespace, resourceVersion=str(next(writes._versions)))
            writes.leases[(namespace, name)] = lease
    if refused is not None:
        handler._json(*refused)
    elif not fresh:
        message = (
            f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )
        handler._json(409, _status(409, "Conflict", message, {"name": name, "kind": "leases"}))
    else:
        handler._json(200, lease)


def evict_pod(handler: Handler, query: dict[str, str], namespace: str, name: str) -> None:
    writes: Writes = handler.api.writes
    eviction = _body(handler)
    writes._wait("eviction")
    code, answer = _eviction(handler, writes, eviction, namespace, name)
    with writes.lock:
        writes.evictions.append(eviction | {"answered": code})
    handler._json(code, answer)


def _eviction(
    handler: Handler, writes: Writes, eviction: dict[str, Any], namespace: str, name: str
) -> tuple[int, dict[str, Any]]:
    with writes.lock:
        refused = writes._refused("eviction", f'pods "{name}"')
        protected = (namespace, name) in writes.protected
    if refused is not None:
        return refused
    try:
        pod = handler.api.pod_object(namespace, name)
    except KeyError:
        return 404, _status(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
    uid = ((eviction.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
    if uid and uid != pod["metadata"]["uid"]:
        message = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata']['uid']}"
        return 409, _status(409, "Conflict", message, {"name": name, "kind": "pods"})
    if protected:
        details = {
            "causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web-pdb needs 1 healthy pods"}]
        }
        return 429, _status(429, "TooManyRequests", _PDB_MESSAGE, details)
    handler.api.delete_pod(namespace, name)
    return 201, _status(201, "", "")


def create_event(handler: Handler, query: dict[str, str], namespace: str) -> None:
    writes: Writes = handler.api.writes
    event = _body(handler)
    with writes.lock:
        refused = writes._refused("event", "events")
        if refused is None:
            event["metadata"].update(namespace=namespace, resourceVersion=str(next(writes._versions)))
            writes.events.append(event)
    handler._json(*(refused or (201, event)))


ROUTES: list[tuple[tuple[str, ...], Any]] = [
    (("GET", "apis", "coordination.k8s.io", "v1", "namespaces", "*", "leases", "*"), get_lease),
    (("POST", "apis", "coordination.k8s.io", "v1", "namespaces", "*", "leases"), create_lease),
    (("PUT", "apis", "coordination.k8s.io", "v1", "namespaces", "*", "leases", "*"), replace_lease),
    (("POST", "api", "v1", "namespaces", "*", "pods", "*", "eviction"), evict_pod),
    (("POST", "api", "v1", "namespaces", "*", "events"), create_event),
]
