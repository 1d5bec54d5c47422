"""One evicter among replicas: a coordination.k8s.io/v1 Lease, held by the replica that may evict.

Every replica audits; only the lease holder evicts (`--deschedule on`). `Elector` is client-go's leader
election (`tools/leaderelection`) with its three durations (`LeaseTimes`): every retry period it reads the
Lease and then

- creates it, holding it, when there is none (409: another replica was first);
- renews it when it holds it (its `renewTime`, replaced with the `resourceVersion` read: a 409 means another
  replica changed it meanwhile, and this one no longer holds it);
- takes it over when the holder has not renewed it for the lease's `leaseDurationSeconds`, as this replica
  measures time, counting one more `leaseTransitions`. It notes when it first saw the holder's last record,
  taking the time *after* the read answered (a slow read never backdates it), so clocks need not agree.

`holding()` is true only within the renew deadline from the start of the last step that created, renewed or
took it (the start: the write happened after it). The renew deadline is shorter than the lease duration, so
the holder stops before any other replica may take over: the other waits the whole duration from a moment
after the write it saw. The duration is written in whole seconds, rounded up (`leaseDurationSeconds` is an
integer), so the others wait at least as long as this replica assumes. The descheduler asks again right
before each eviction POST (`left()`), and gives the POST no longer than what is left.
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client import CoordinationV1Api

from rulesched.cluster.kube.access import read_json
from rulesched.cluster.kube.errors import ConflictError, NotFoundError, api_errors
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


@dataclass(frozen=True, slots=True)
class LeaseTimes:
    """client-go's three durations, in seconds (settings `lease_duration`, `lease_renew_deadline`,
    `lease_retry_period`): the lease's duration > the renew deadline > the retry period."""

    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(f"lease times must be duration > renew deadline > retry period > 0: {self}")

    @classmethod
    def scaled(cls, duration: float) -> LeaseTimes:
        """client-go's defaults (15 s, 10 s, 2 s) scaled to `duration`."""
        return cls(duration, duration * 2 / 3, duration * 2 / 15)

    @property
    def written(self) -> int:
        """`leaseDurationSeconds`: the duration in whole seconds, rounded up."""
        return max(1, math.ceil(self.duration))


class Elector:
    """Holds the lease for this replica (`identity`) when it can; `holding()` says whether it does now."""

    def __init__(
        self, client: LeaseClient, identity: str, times: LeaseTimes, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.client = client
        self.identity = identity
        self.times = times
        self._clock = clock
        self._renewed: float | None = None
        """When the last step that created, renewed or took the lease began (this replica's clock)."""
        self._seen: tuple[Any, ...] | None = None
        self._seen_at = 0.0
        self.loop = BackgroundLoop(self.step, LoopOptions("rulesched-lease", interval=times.retry_period))

    def left(self) -> float:
        """Seconds this replica may still act as the holder (0: it does not hold the lease)."""
        renewed = self._renewed
        return 0.0 if renewed is None else max(0.0, self.times.renew_deadline - (self._clock() - renewed))

    def holding(self) -> bool:
        return self.left() > 0.0

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def step(self) -> Outcome:
        """One look at the lease: create, renew or take it over when this replica may."""
        began = self._clock()
        was = self.holding()
        try:
            held = self._try()
        except ConflictError:
            held, self._renewed = False, None  # another replica wrote it first: it holds the lease
        if held:
            self._renewed = began
        elif not self.holding():
            self._renewed = None
        if was != self.holding():
            what = "holds" if self.holding() else "no longer holds"
            log.info("%s %s the lease %s/%s", self.identity, what, self.client.namespace, self.client.name)
        return "ok"

    def _try(self) -> bool:
        """Whether this replica holds the lease after this step (raises `ConflictError` on a lost race)."""
        lease = self.client.get()
        observed = self._clock()  # after the read: what it shows was true no later than now
        if lease is None:
            self.client.create(self._spec(transitions=0))
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if holder == self.identity:
            self.client.replace(lease, spec | {"renewTime": micro_time(), "leaseDurationSeconds": self.times.written})
            return True
        if holder and not self._expired(spec, observed):
            self._renewed = None  # another replica holds it: stop at once
            return False
        self.client.replace(lease, self._spec(transitions=int(spec.get("leaseTransitions") or 0) + 1))
        return True

    def _expired(self, spec: dict[str, Any], observed: float) -> bool:
        """Whether the holder has not renewed for its lease's duration, as seen from here."""
        seen = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        if seen != self._seen:
            self._seen, self._seen_at = seen, observed
        duration = spec.get("leaseDurationSeconds")
        return observed - self._seen_at >= float(duration if isinstance(duration, int) else self.times.written)

    def _spec(self, transitions: int) -> dict[str, Any]:
        stamp = micro_time()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.times.written,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }
