"""The server's continuous audit (issue #26): GET /audit, its metrics and log lines, after the changes that
matter (a rules reload, a node label, a metrics sample), on a real server over files and the loopback API."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.cli import main
from rulesched.settings import Settings
from tests.audit_inputs import write_inputs
from tests.builders import rule_set, write_rules
from tests.kubeapi import KubeAPI, wait_for
from tests.server import running_server

LABELLED = """
filters:
- name: labelled
  expression: >-
    has(node.metadata.labels) && 'filter.xy.com' in node.metadata.labels
    && node.metadata.labels['filter.xy.com'] == 'yes'
  message: node not labelled filter.xy.com=yes
"""
NOT_BUSY = """
- name: not-busy
  expression: "!has(metrics.cpu) || metrics.cpu.usage < 8.0"
  message: node too busy
"""


def violations(client: httpx.Client) -> list[tuple[str, str, str]]:
    answer = client.get("/audit").json()
    return [(v["pod"], v["node"], v["rule"]) for v in answer["violations"]]


def test_the_server_reports_what_the_offline_command_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = write_inputs(tmp_path)
    files = ["--rules", str(paths["rules"]), "--nodes", str(paths["nodes"]), "--pods", str(paths["pods"])]
    main(["audit", *files, "-o", "json"])
    offline = json.loads(capsys.readouterr().out)
    settings = Settings(rules_dir=paths["rules"], nodes_file=paths["nodes"], pods_file=paths["pods"], cluster="off")
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_for(lambda: client.get("/audit").json()["complete"], what="a complete audit")
        served = client.get("/audit").json()
    assert served["violations"] == offline["violations"]
    assert served["counts"] == offline["counts"]
    assert len(offline["violations"]) == 4


@pytest.fixture
def files_client(tmp_path: Path) -> Iterator[httpx.Client]:
    paths = write_inputs(tmp_path)
    settings = Settings(rules_dir=paths["rules"], nodes_file=paths["nodes"], pods_file=paths["pods"], cluster="off")
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_for(lambda: client.get("/audit").json()["complete"], what="a complete audit")
        yield client


def test_audit_pages_are_bounded(files_client: httpx.Client) -> None:
    first = files_client.get("/audit", params={"limit": 3}).json()
    assert (len(first["violations"]), first["total"], first["next"]) == (3, 4, 3)
    rest = files_client.get("/audit", params={"offset": 3, "limit": 3}).json()
    assert (len(rest["violations"]), rest["next"]) == (1, None)
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"offset": "x"}):
        answer = files_client.get("/audit", params=bad)
        assert answer.status_code == 400, bad
        assert "offset" in answer.json()["error"]


def test_audit_answers_carry_the_headers_of_every_json_answer(files_client: httpx.Client) -> None:
    """GET /audit answers from the controller's own surface exactly as the HTTP edge answers JSON (GET /rules)."""
    for answer in (files_client.get("/audit"), files_client.get("/audit", params={"limit": 0})):
        rules = files_client.get("/rules")
        assert list(answer.headers.keys()) == list(rules.headers.keys())
        assert answer.headers["content-type"] == rules.headers["content-type"] == "application/json"
        assert int(answer.headers["content-length"]) == len(answer.content)


def test_audit_metrics_count_pods_per_rule_and_the_age(files_client: httpx.Client) -> None:
    text = files_client.get("/metrics").text
    assert 'rulesched_audit_violations{rule="fits",rule_set="payments"} 1.0' in text
    assert 'rulesched_audit_violations{rule="soft",rule_set="payments"} 2.0' in text
    age = next(line for line in text.splitlines() if line.startswith("rulesched_audit_age_seconds "))
    assert 0.0 <= float(age.split()[1]) < 5.0


def test_without_a_pod_source_there_is_no_audit(tmp_path: Path) -> None:
    paths = write_inputs(tmp_path)
    settings = Settings(rules_dir=paths["rules"], nodes_file=paths["nodes"], cluster="off")
    with running_server(settings) as url:
        answer = httpx.get(f"{url}/audit")
    assert answer.status_code == 404
    assert "pod source" in answer.json()["error"]


def live_settings(api: KubeAPI, tmp_path: Path, rules: Path) -> Settings:
    return Settings(
        rules_dir=rules,
        kubeconfig=api.kubeconfig(tmp_path / "kubeconfig"),
        cluster="on",
        metrics_interval=0.2,
        metrics_max_age=60,
        reload_debounce=0.05,
        reload_interval=1,
        audit_interval=0.05,
    )


def test_audit_follows_node_labels_rules_reloads_and_metrics(
    api: KubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rules = tmp_path / "rules"
    write_rules(rules, rule_set("xy", LABELLED))
    on_d = [("web-0", "node-d", "labelled"), ("sidecar-app", "node-d", "labelled")]  # by namespace
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with (
        running_server(live_settings(api, tmp_path, rules)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        wait_for(lambda: violations(client) == on_d, timeout=10, what="node-d's pods in violation")
        api.label_node("node-d", "filter.xy.com", "yes")  # a watch event: node-d passes now
        wait_for(lambda: violations(client) == [], timeout=10, what="the label change audited")
        write_rules(rules, rule_set("xy", LABELLED + NOT_BUSY))  # a reload: node-d's 12 CPUs are too busy
        busy = [("web-0", "node-d", "not-busy"), ("sidecar-app", "node-d", "not-busy")]
        wait_for(lambda: violations(client) == busy, timeout=10, what="the reloaded rules audited")
        api.set_usage("node-d", "1", "1Gi")  # a metrics poll: node-d is quiet again
        wait_for(lambda: violations(client) == [], timeout=10, what="the metrics change audited")
    lines = [r for r in caplog.records if r.getMessage().startswith("audit: fx-alpha/web-0 on node-d")]
    said = [r.getMessage().split(" on node-d ")[1].split(":")[0] for r in lines]
    assert said == [
        "starts violating xy/labelled",
        "stops violating xy/labelled",
        "starts violating xy/not-busy",
        "stops violating xy/not-busy",
    ]
    fields: dict[str, Any] = lines[0].__dict__["violation"]
    assert fields["ruleSet"] == "xy"
    assert fields["message"] == "node not labelled filter.xy.com=yes"
