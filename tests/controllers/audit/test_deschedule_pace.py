"""Descheduling's pace (issue #26): the rates, the cool-down, each refusal counted and logged once, dry-run,
Report, and nothing without the lease, against the loopback API."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.controllers.audit.descheduler import DescheduleOptions
from tests.deschedule_setup import POLICY, controlled, pods_seen, rules, setting
from tests.kubeapi import KubeAPI

ON = DescheduleOptions("on", rate=600.0, cooldown=600.0)
PODS = ("web-1", "web-2", "web-3")


def three(api: KubeAPI) -> None:
    for name in PODS:
        controlled(api, "fx-alpha", name)


def logged(caplog: pytest.LogCaptureFixture, pod: str) -> list[str]:
    found = [r for r in caplog.records if r.getMessage().startswith("deschedule: ") and f"/{pod} on" in r.getMessage()]
    return [r.__dict__["deschedule"] for r in found]


def test_the_global_rate_bounds_evictions(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    three(api)
    with setting(api, access, tmp_path, rules(), DescheduleOptions("on", rate=1.0)) as found:
        pods_seen(found, *PODS)
        found.steps(5)
    assert api.writes.evicted() == ["fx-alpha/web-1"]


def test_the_rule_sets_rate_bounds_evictions(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    three(api)
    text = rules(policy=POLICY.replace("maxEvictionsPerMinute: 600", "maxEvictionsPerMinute: 1"))
    with setting(api, access, tmp_path, text, ON) as found:
        pods_seen(found, *PODS)
        found.steps(5)
    assert len(api.writes.evicted()) == 1


def test_a_rate_of_many_a_minute_evicts_them_all(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    three(api)
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, *PODS)
        found.steps(3)
        time.sleep(0.2)  # 600 a minute: one every 0.1 s
        found.steps(3)
    assert sorted(api.writes.evicted()) == [f"fx-alpha/{name}" for name in PODS]


def test_a_pdb_refusal_is_retried_after_the_cool_down_and_logged_once(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controlled(api, "fx-alpha", "web-1")
    api.writes.protect("fx-alpha", "web-1")
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(), DescheduleOptions("on", rate=600.0, cooldown=1.5)) as found:
        pods_seen(found, "web-1")
        found.steps(4)
        assert len(api.writes.evictions) == 1, "not again within the cool-down"
        time.sleep(1.6)
        found.steps(2)
    assert [e["answered"] for e in api.writes.evictions] == [429, 429]
    assert found.descheduler.counts() == {("xy", "blocked"): 2}
    assert logged(caplog, "web-1") == ["blocked"]


@pytest.mark.parametrize(("status", "outcome"), [(403, "forbidden"), (404, "gone"), (409, "conflict"), (500, "error")])
def test_refusals_are_counted_by_outcome(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, status: int, outcome: str
) -> None:
    controlled(api, "fx-alpha", "web-1")
    api.writes.refuse("eviction", status)
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "web-1")
        found.steps(3)
    assert found.descheduler.counts() == {("xy", outcome): 1}
    assert api.writes.events == []


def test_dry_run_evicts_nothing_and_counts_what_it_would(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    controlled(api, "fx-alpha", "web-1")
    with setting(api, access, tmp_path, rules(), DescheduleOptions("dry-run", rate=600.0)) as found:
        pods_seen(found, "web-1")
        found.steps(3)
    assert api.writes.evictions == []
    assert found.descheduler.counts() == {("xy", "dry-run"): 1}


def test_report_only_evicts_nothing(
    api: KubeAPI, access: KubeAccess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controlled(api, "fx-alpha", "web-1")
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with setting(api, access, tmp_path, rules(policy=POLICY.replace("action: Evict", "action: Report")), ON) as found:
        pods_seen(found, "web-1")
        found.steps(3)
    assert api.writes.evictions == []
    assert logged(caplog, "web-1") == ["report-only"]


def test_without_the_lease_nothing_is_evicted(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    controlled(api, "fx-alpha", "web-1")
    with setting(api, access, tmp_path, rules(), ON) as found:
        pods_seen(found, "web-1")
        api.writes.refuse("lease", 403)
        for _ in range(3):
            found.elector.loop.run_once()
            found.auditor.step()
    assert api.writes.evictions == []


def test_a_rule_set_without_descheduling_evicts_nothing(api: KubeAPI, access: KubeAccess, tmp_path: Path) -> None:
    controlled(api, "fx-alpha", "web-1")
    with setting(api, access, tmp_path, rules(policy=""), ON) as found:
        pods_seen(found, "web-1")
        found.steps(3)
    assert api.writes.evictions == []
