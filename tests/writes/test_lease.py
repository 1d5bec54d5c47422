"""One evicter among replicas (issue #26): the Lease elector with the real client against the loopback API."""

from __future__ import annotations

import threading
import time

import pytest
from pydantic import ValidationError

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.kube.errors import ConflictError
from rulesched.settings import Settings
from rulesched.writes.lease import Elector, LeaseClient, LeaseTimes
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


def test_the_duration_is_written_in_whole_seconds_rounded_up(api: KubeAPI, access: KubeAccess) -> None:
    Elector(LeaseClient(access.api, NAMESPACE, NAME), "one", LeaseTimes(2.5, 1.5, 0.3)).step()
    lease = api.writes.lease(NAMESPACE, NAME)
    assert lease is not None
    assert lease["spec"]["leaseDurationSeconds"] == 3


def test_lease_times_keep_client_gos_order() -> None:
    assert LeaseTimes.scaled(15.0) == LeaseTimes(15.0, 10.0, 2.0)
    with pytest.raises(ValueError, match="duration > renew deadline > retry period"):
        LeaseTimes(10.0, 10.0, 2.0)
    with pytest.raises(ValidationError, match="--lease-duration > --lease-renew-deadline > --lease-retry-period"):
        Settings(lease_duration=5, lease_renew_deadline=6)


def test_the_holder_stops_at_its_renew_deadline_before_the_lease_expires(api: KubeAPI, access: KubeAccess) -> None:
    first = Elector(LeaseClient(access.api, NAMESPACE, NAME), "one", LeaseTimes(3.0, 0.5, 0.1))
    first.step()
    assert first.holding()
    time.sleep(0.55)  # no renewal since: past the renew deadline, well within the lease's 3 s
    assert not first.holding()
    assert first.left() == 0.0


def test_a_slow_read_does_not_backdate_when_the_holder_was_seen(api: KubeAPI, access: KubeAccess) -> None:
    first, second = elector(access, "one"), elector(access, "two")
    first.step()  # then one stops renewing
    api.writes.stall("lease", 0.6)
    began = time.monotonic()
    second.step()  # the read answers 0.6 s later, with one's record: seen then, not when the read began
    api.writes.stall("lease", 0.0)
    time.sleep(max(0.0, began + 1.1 - time.monotonic()))
    second.step()  # 1.1 s after the read began, 0.5 s after it answered: the lease (1 s) has not expired
    assert not second.holding()
    time.sleep(0.6)
    second.step()
    assert second.holding()


def test_two_replicas_never_hold_at_once_on_a_slow_api(api: KubeAPI, access: KubeAccess) -> None:
    """Two's read of the lease takes 1 s, and one renews while it is under way: two sees that renewal, though its
    read began half a second before it. Then one hangs (renews no more) and two takes over. Sampled after each of
    two's steps, the two never hold at once: one stops at its renew deadline (1.2 s after its renewal began), two
    takes over no sooner than the lease's duration (2 s) after its read answered."""
    times = LeaseTimes(2.0, 1.2, 0.1)
    first, second = (Elector(LeaseClient(access.api, NAMESPACE, NAME), name, times) for name in ("one", "two"))
    first.step()
    stalls = [1.0, 0.0]  # two's read, then one's
    api.writes.stall("lease", lambda: stalls.pop(0) if stalls else 0.0)
    reading = threading.Thread(target=second.step)
    reading.start()
    time.sleep(0.5)
    first.step()  # renewed while two's read waits; one hangs from here on
    reading.join()
    assert first.holding()
    overlaps, end = 0, time.monotonic() + 4.0
    while time.monotonic() < end and not second.holding():
        second.step()
        overlaps += first.holding() and second.holding()
        time.sleep(0.005)
    assert second.holding(), "two took the lease over"
    assert overlaps == 0
