"""One evicter among replicas (issue #26): two `rulesched serve --deschedule on` processes against the loopback
API; exactly one evicts, and when it goes, the other takes the lease over and evicts."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import httpx

from rulesched.cluster.kube.access import KubeAccess
from tests.builders import write_rules
from tests.deschedule_setup import controlled, rules
from tests.kubeapi import KubeAPI, wait_for
from tests.server import spawned

LEASE = ("rulesched-system", "rulesched-descheduler")


def evicted(port: int) -> float:
    """What the replica's /metrics counts as evicted."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = re.search(r'^rulesched_evictions_total\{outcome="evicted",rule_set="xy"\} (\S+)$', text, re.MULTILINE)
    return float(found[1]) if found else 0.0


def options(api: KubeAPI, tmp_path: Path, identity: str) -> list[str]:
    return [
        "--rules", str(tmp_path / "rules"), "--kubeconfig", str(api.kubeconfig(tmp_path / "kubeconfig")),
        "--cluster", "on", "--deschedule", "on", "--deschedule-rate", "600", "--lease-identity", identity,
        "--lease-duration", "2", "--audit-interval", "0.05", "--metrics-interval", "5",
    ]  # fmt: skip


def test_exactly_one_replica_evicts_and_the_other_takes_over(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    write_rules(tmp_path / "rules", rules())
    for name in ("web-1", "web-2"):
        controlled(api, "fx-alpha", name)
    with contextlib.ExitStack() as first, contextlib.ExitStack() as second:
        ports = {
            "one": first.enter_context(spawned(options(api, tmp_path, "one"), tmp_path / "one.log")),
            "two": second.enter_context(spawned(options(api, tmp_path, "two"), tmp_path / "two.log")),
        }
        wait_for(lambda: len(api.writes.evicted()) == 2, timeout=20, what="both pods evicted")
        lease = api.writes.lease(*LEASE)
        assert lease is not None
        holder = lease["spec"]["holderIdentity"]
        other = "two" if holder == "one" else "one"
        # The API sees an eviction before the replica has read its answer and counted it: wait for the count.
        wait_for(lambda: evicted(ports[holder]) == 2.0, timeout=10, what="the holder's count")
        assert evicted(ports[other]) == 0.0
        (first if holder == "one" else second).close()  # the holder goes away without releasing the lease
        controlled(api, "fx-alpha", "web-3")
        wait_for(lambda: len(api.writes.evicted()) == 3, timeout=20, what="the other replica to take over")
        wait_for(lambda: evicted(ports[other]) == 1.0, timeout=10, what="the new holder's count")
        lease = api.writes.lease(*LEASE)
        assert lease is not None
        assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == (other, 1)
    assert sorted(api.writes.evicted()) == ["fx-alpha/web-1", "fx-alpha/web-2", "fx-alpha/web-3"]
