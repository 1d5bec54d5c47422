"""One evicter among replicas (issue #26): the Lease elector with the real client against the loopback API."""

from __future__ import annotations

import time

import pytest

from rulesched.cluster.errors import ConflictError
from rulesched.cluster.kube import KubeAccess
from rulesched.cluster.lease import Elector, LeaseClient, LeaseTimes
from tests.kubeapi import KubeAPI

NAMESPACE, NAME = "rulesched-system", "rulesched-descheduler"


def elector(access: KubeAccess, identity: str, duration: float = 1.0) -> Elector:
    return Elector(LeaseClient(access.api, NAMESPACE, NAME), identity, LeaseTimes.scaled(duration))


def test_the_first_replica_creates_the_lease_and_holds_it(api: KubeAPI, access: KubeAccess) -> None:
    first, second = elector(access, "one"), elector(access, "two")
    first.step()
    second.step()
    assert (first.holding(), second.holding()) == (True, False)
    lease = api.writes.lease(NAMESPACE, NAME)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "one"
    assert lease["spec"]["leaseTransitions"] == 0


def test_the_holder_renews_with_the_resource_version_it_read(api: KubeAPI, access: KubeAccess) -> None:
    first = elector(access, "one")
    first.step()
    before = api.writes.lease(NAMESPACE, NAME)
    first.step()
    after = api.writes.lease(NAMESPACE, NAME)
    assert before is not None
    assert after is not None
    assert after["spec"]["renewTime"] > before["spec"]["renewTime"]
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    assert api.requests("PUT /apis/coordination.k8s.io/v1/namespaces/rulesched-system/leases/rulesched-descheduler")


def test_a_lease_not_renewed_for_its_duration_is_taken_over(api: KubeAPI, access: KubeAccess) -> None:
    first, second = elector(access, "one"), elector(access, "two")
    first.step()
    second.step()  # sees one's renewal: not expired
    assert not second.holding()
    time.sleep(1.1)  # one stops renewing (its process is gone): after the lease's duration, two takes it
    assert not first.holding(), "a holder that could not renew stops within the lease's duration"
    second.step()
    assert second.holding()
    lease = api.writes.lease(NAMESPACE, NAME)
    assert lease is not None
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("two", 1)
    first.step()  # one comes back: two holds a fresh lease, so one does not
    assert not first.holding()


def test_a_holder_that_cannot_reach_the_api_stops_within_the_duration(api: KubeAPI, access: KubeAccess) -> None:
    first = elector(access, "one")
    first.step()
    assert first.holding()
    api.writes.refuse("lease", 403)
    assert first.loop.run_once() is None, "a refused renewal is a failure of the loop"
    time.sleep(1.05)
    assert not first.holding()


def test_writes_that_lost_a_race_are_409s(api: KubeAPI, access: KubeAccess) -> None:
    first, second = elector(access, "one"), elector(access, "two")
    first.step()
    with pytest.raises(ConflictError, match="already exists"):
        second.client.create(second._spec(transitions=0))  # two read "no lease" just before one created it
    stale = first.client.get()
    assert stale is not None
    first.step()  # one renews: what two read before is stale now
    with pytest.raises(ConflictError, match="the object has been modified"):
        second.client.replace(stale, second._spec(transitions=1))
    assert first.holding()


def test_a_conflict_during_a_step_means_not_holding(api: KubeAPI, access: KubeAccess) -> None:
    first = elector(access, "one")
    api.writes.refuse("lease", 409)
    assert first.step() == "ok"
    assert not first.holding()
