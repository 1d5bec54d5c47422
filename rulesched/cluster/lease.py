"""One evicter among replicas: a coordination.k8s.io/v1 Lease, held by the replica that may evict.

Every replica audits; only the lease holder evicts (`--deschedule on`). `Elector` runs one step every third
of the lease's duration in a `BackgroundLoop`: it reads the Lease and then

- creates it, holding it, when there is none (409: another replica was first);
- renews it when it holds it (its `renewTime`, replaced with the `resourceVersion` read: a 409 means another
  replica changed it meanwhile, and this one no longer holds it);
- takes it over when the holder has not renewed it for `leaseDurationSeconds`, as this replica measures
  time (it notes when it first saw the holder's last renewal, so clocks need not agree), counting one more
  `leaseTransitions`.

`holding()` is true only within the lease's duration from the start of the last step that created, renewed or
took it: a replica that cannot reach the API stops evicting by itself before another may take over.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client import CoordinationV1Api

from rulesched.cluster.errors import ConflictError, NotFoundError, api_errors
from rulesched.cluster.kube import read_json
from rulesched.cluster.loop import BackgroundLoop, LoopOptions, Outcome

log = logging.getLogger(__name__)

Lease = dict[str, Any]


def micro_time(when: datetime.datetime | None = None) -> str:
    """A MicroTime as the API writes it: RFC 3339 with microseconds, in UTC."""
    return (when or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseClient:
    """Reads, creates and replaces one Lease through the Kubernetes API."""

    def __init__(self, api: Any, namespace: str, name: str, *, timeout: float = 5.0) -> None:
        self._api = CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self._timeout = timeout

    def get(self) -> Lease | None:
        """The Lease, or None when there is none."""
        try:
            with api_errors():
                response = self._api.read_namespaced_lease(
                    self.name, self.namespace, _preload_content=False, _request_timeout=self._timeout
                )
        except NotFoundError:
            return None
        lease: Lease = read_json(response)
        return lease

    def create(self, spec: dict[str, Any]) -> Lease:
        """Create the Lease with `spec` (raises `ConflictError` when it exists)."""
        body: Any = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": self._metadata(),
            "spec": spec,
        }
        with api_errors():
            response = self._api.create_namespaced_lease(
                self.namespace, body, _preload_content=False, _request_timeout=self._timeout
            )
        created: Lease = read_json(response)
        return created

    def replace(self, lease: Lease, spec: dict[str, Any]) -> Lease:
        """Replace the Lease read as `lease` with `spec` (raises `ConflictError` when it changed since)."""
        version = (lease.get("metadata") or {}).get("resourceVersion")
        metadata = self._metadata() | {"resourceVersion": version}
        body: Any = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}
        with api_errors():
            response = self._api.replace_namespaced_lease(
                self.name, self.namespace, body, _preload_content=False, _request_timeout=self._timeout
            )
        replaced: Lease = read_json(response)
        return replaced

    def _metadata(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace}


class Elector:
    """Holds the lease for this replica (`identity`) when it can; `holding()` says whether it does now."""

    def __init__(
        self, client: LeaseClient, identity: str, duration: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.identity = identity
        self.duration = duration
        self._clock = clock
        self._held_since: float | None = None
        """When the last step that created, renewed or took the lease began (this replica's clock)."""
        self._seen: tuple[Any, ...] | None = None
        self._seen_at = 0.0
        self.loop = BackgroundLoop(self.step, LoopOptions("rulesched-lease", interval=duration / 3))

    def holding(self) -> bool:
        held = self._held_since
        return held is not None and self._clock() - held < self.duration

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def step(self) -> Outcome:
        """One look at the lease: create, renew or take it over when this replica may."""
        began = self._clock()
        was = self.holding()
        try:
            held = self._try(began)
        except ConflictError:
            held = False  # another replica wrote it first: it holds the lease
        if held:
            self._held_since = began
        elif self._held_since is not None and not self.holding():
            self._held_since = None
        if was != self.holding():
            what = "holds" if self.holding() else "no longer holds"
            log.info("%s %s the lease %s/%s", self.identity, what, self.client.namespace, self.client.name)
        return "ok"

    def _try(self, now: float) -> bool:
        """Whether this replica holds the lease after this step (raises `ConflictError` on a lost race)."""
        lease = self.client.get()
        if lease is None:
            self.client.create(self._spec(transitions=0))
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if holder == self.identity:
            self.client.replace(lease, spec | {"renewTime": micro_time()})
            return True
        if holder and not self._expired(spec, now):
            self._held_since = None  # another replica holds it: stop at once
            return False
        self.client.replace(lease, self._spec(transitions=int(spec.get("leaseTransitions") or 0) + 1))
        return True

    def _expired(self, spec: dict[str, Any], now: float) -> bool:
        """Whether the holder has not renewed for its lease's duration, as seen from here."""
        seen = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        if seen != self._seen:
            self._seen, self._seen_at = seen, now
        duration = spec.get("leaseDurationSeconds") or self.duration
        return now - self._seen_at >= float(duration)

    def _spec(self, transitions: int) -> dict[str, Any]:
        stamp = micro_time()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.duration)),
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }
