"""Fresh before acting (issue #39): right before an eviction the pod is evaluated again on its node with the rule
book and the state of now, and the lease is asked again, against the loopback API. The violations below are
left stale on purpose: the audit found them, then the world changed before the descheduler's step."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.controllers.audit.descheduler import DescheduleOptions
from rulesched.writes.lease import Elector, LeaseTimes
from tests.builders import write_rules
from tests.deschedule_setup import Setting, controlled, pods_seen, rules, setting
from tests.kubeapi import KubeAPI, wait_for

ON = DescheduleOptions("on", rate=600.0, cooldown=600.0)


def states(caplog: pytest.LogCaptureFixture, pod: str) -> list[str]:
    found = [r for r in caplog.records if r.getMessage().startswith("deschedule: ") and f"/{pod} on" in r.getMessage()]
    return [r.__dict__["deschedule"] for r in found]


def audited(found: Setting) -> None:
    """Audit once without acting: the violations are found, and kept as they are."""
    descheduler, found.auditor.descheduler = found.auditor.descheduler, None
    found.auditor.step()
    found.auditor.descheduler = descheduler
    assert found.auditor.violations(), "the audit found the violation"


def test_a_pod_whose_node_changed_since_the_audit_is_not_evicted(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controlled(api, "fx-alpha", "web-1")
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "web-1")
        audited(found)
        api.label_node("node-d", "filter.xy.com", "yes")  # the node passes the rule now
        nodes = found.auditor.sources.nodes
        wait_for(lambda: (nodes.get("node-d") or {})["metadata"]["labels"]["filter.xy.com"] == "yes", what="label")
        found.elector.step()
        found.descheduler.step(found.auditor)
    assert api.writes.evictions == []
    assert states(caplog, "web-1") == ["no-longer-violates"]


def test_a_pod_whose_rule_was_fixed_since_the_audit_is_not_evicted(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controlled(api, "fx-alpha", "web-1")
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "web-1")
        audited(found)
        write_rules(tmp_path / "rules", rules("true"))  # the rule is fixed: every node passes
        assert found.auditor.store.reload() == "loaded"
        found.elector.step()
        found.descheduler.step(found.auditor)
        assert api.writes.evictions == []
        assert states(caplog, "web-1") == ["rules-changed"]
        found.steps()  # the audit evaluates the new book: no violation is left
        assert found.auditor.violations() == []
    assert api.writes.evictions == []


def test_the_eviction_post_ends_when_the_lease_hold_does(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    """A holder may act for its renew deadline from its last renewal: an eviction POST gets no longer than what
    is left of it, however long the evicter's own timeout (10 s)."""
    controlled(api, "fx-alpha", "web-1")
    api.writes.stall("eviction", 3.0)
    with setting(api, access, tmp_path, rules(), ON, LeaseTimes(2.0, 1.0, 0.2)) as found:
        pods_seen(found, "web-1")
        found.elector.step()
        began = time.monotonic()
        found.auditor.step()
        took = time.monotonic() - began
    assert took < 2.0, f"the POST waited {took:.1f} s"
    assert found.descheduler.counts() == {("xy", "error"): 1}


class Jumps:
    """A monotonic clock that jumps a minute ahead from its `after`-th reading on, once armed."""

    def __init__(self) -> None:
        self.after: int | None = None
        self.readings = 0

    def __call__(self) -> float:
        if self.after is None:
            return time.monotonic()
        self.readings += 1
        return time.monotonic() + (60.0 if self.readings >= self.after else 0.0)


def test_a_lease_lost_right_before_the_post_stops_the_eviction(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controlled(api, "fx-alpha", "web-1")
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "web-1")
        audited(found)
        clock = Jumps()
        elector = Elector(found.elector.client, "me", found.elector.times, clock)
        found.descheduler.elector = elector
        elector.step()
        # Held when the step starts and at each candidate (web-0, then web-1, sorted): lost when web-1's POST
        # is about to be sent, after its checks.
        clock.after = 4
        found.descheduler.step(found.auditor)
    assert api.writes.evictions == []
    assert states(caplog, "web-1") == ["lease-lost"]
