"""The reload canary and the empty book, under a real server: rule files dropped into its rules directory.

A new book is tried on the pods of recent filter calls (the stand-in pod before any) over the current nodes
before it replaces the active one; a rule that cannot be evaluated on any node, or a filter that rejects every
node, keeps the last good rules (`--reload-canary enforce`), is only logged (`warn`) or is not looked for (`off`).
A reload to no rules at all is refused unless `--allow-empty-rules`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.extender.canary import RecentPods
from tests.rules.test_reload import NAMES, eventually, metric, passed, reject, settings
from tests.server import running_server

WEB_POD = {
    "metadata": {"name": "web-1", "namespace": "default", "uid": "u-web", "labels": {"app": "web"}},
    "spec": {"containers": []},
}


def rule_set(name: str, expression: str, *, kind: str = "filters") -> str:
    return f"""\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: {name}
spec:
  {kind}:
  - name: {name}-rule
    expression: "{expression}"
"""


MISSPELT = rule_set("zone", "node.metadata.labels['zonee'] == 'a'")
"""Loads (a map lookup type-checks), but no node has the label: it fails on every node."""
NOWHERE = rule_set("nowhere", "node.metadata.name == 'no-such-node'")
WEB_ONLY = rule_set("web", "pod.metadata.labels['app'] == 'web'")
"""Fails for a pod without the label (the stand-in pod), passes for the pods of the web app."""


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    directory = tmp_path / "rules"
    directory.mkdir()
    (directory / "a.yaml").write_text(reject("a", "k8s-node1"))
    return directory


@pytest.fixture
def server(rules: Path) -> Iterator[httpx.Client]:
    with running_server(settings(rules)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def rejected(client: httpx.Client) -> dict[str, Any]:
    eventually(lambda: client.get("/rules").json()["lastRejected"] is not None)
    last: dict[str, Any] = client.get("/rules").json()["lastRejected"]
    return last


def generation(client: httpx.Client) -> int:
    value: int = client.get("/rules").json()["active"]["generation"]
    return value


def test_a_rule_failing_on_every_node_keeps_the_last_good_rules(
    rules: Path, server: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    assert passed(server) == ["k8s-master", "k8s-node2"]
    with caplog.at_level(logging.ERROR, logger="rulesched.rules"):
        (rules / "zone.yaml").write_text(MISSPELT)
        [error] = rejected(server)["errors"]
    assert error["file"].endswith("zone.yaml")
    assert (error["ruleSet"], error["rule"]) == ("zone", "zone-rule")
    assert "could not be evaluated on any node" in error["message"]
    assert "zonee" in error["message"]
    assert passed(server) == ["k8s-master", "k8s-node2"]
    assert generation(server) == 1
    assert metric(server, "rulesched_rules_rejected") == 1.0
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "generation 1 stays active" in line
    assert "zone/zone-rule: refused by the canary" in line


def test_a_filter_rejecting_every_node_is_refused(rules: Path, server: httpx.Client) -> None:
    passed(server)
    (rules / "nowhere.yaml").write_text(NOWHERE)
    [error] = rejected(server)["errors"]
    assert error["rule"] == "nowhere-rule"
    assert "rejected every node" in error["message"]
    assert passed(server) == ["k8s-master", "k8s-node2"]


def test_without_any_call_yet_the_stand_in_pod_is_tried(rules: Path, server: httpx.Client) -> None:
    (rules / "web.yaml").write_text(WEB_ONLY)
    [error] = rejected(server)["errors"]
    assert error["rule"] == "web-rule"


def test_the_pods_of_recent_filter_calls_are_tried(rules: Path, server: httpx.Client) -> None:
    response = server.post("/filter", json={"Pod": WEB_POD, "NodeNames": NAMES})
    assert response.status_code == 200
    (rules / "web.yaml").write_text(WEB_ONLY)
    eventually(lambda: generation(server) == 2)
    assert server.get("/rules").json()["lastRejected"] is None


def test_a_rule_failing_on_some_nodes_only_loads(rules: Path, server: httpx.Client) -> None:
    passed(server)
    (rules / "master.yaml").write_text(rule_set("master", "node.metadata.name != 'k8s-master'"))
    eventually(lambda: generation(server) == 2)
    assert passed(server) == ["k8s-node2"]


def test_a_score_failing_on_every_node_is_refused(rules: Path, server: httpx.Client) -> None:
    passed(server)
    (rules / "score.yaml").write_text(rule_set("score", "double(node.metadata.labels['nope'])", kind="scores"))
    [error] = rejected(server)["errors"]
    assert error["rule"] == "score-rule"


def test_warn_uses_the_new_rules_and_logs_a_warning(rules: Path, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="rulesched.rules"),
        running_server(settings(rules, reload_canary="warn")) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        passed(client)
        (rules / "nowhere.yaml").write_text(NOWHERE)
        eventually(lambda: generation(client) == 2)
        assert passed(client) == []
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.startswith("reload canary (warn): the new rules are used anyway")
    assert "nowhere/nowhere-rule" in line


def test_off_tries_nothing(rules: Path) -> None:
    with running_server(settings(rules, reload_canary="off")) as url, httpx.Client(base_url=url) as client:
        (rules / "nowhere.yaml").write_text(NOWHERE)
        eventually(lambda: generation(client) == 2)


def test_the_canary_judges_only_on_what_it_tried_in_its_time(rules: Path) -> None:
    with (
        running_server(settings(rules, reload_canary_seconds=1e-9)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        (rules / "nowhere.yaml").write_text(NOWHERE)
        eventually(lambda: generation(client) == 2)


def test_recent_pods_keep_the_latest_call_of_each_pod_within_their_bound() -> None:
    recent = RecentPods(2, keep_nodes=False)
    pods = [{"metadata": {"name": name, "namespace": "default"}} for name in ("a", "b", "c")]
    for pod in [pods[0], pods[1], pods[0], pods[2]]:
        recent.seen(pod, ())
    assert [pod["metadata"]["name"] for pod, _ in recent.latest()] == ["a", "c"]


def test_emptying_the_rules_directory_keeps_the_last_good_rules(rules: Path, server: httpx.Client) -> None:
    (rules / "a.yaml").unlink()
    [error] = rejected(server)["errors"]
    assert "no rule sets" in error["message"]
    assert "--allow-empty-rules" in error["message"]
    assert passed(server) == ["k8s-master", "k8s-node2"]
    assert metric(server, "rulesched_rules_rejected") == 1.0


def test_allow_empty_rules_lets_a_reload_remove_every_rule(rules: Path) -> None:
    with (
        running_server(settings(rules, allow_empty_rules=True)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        (rules / "a.yaml").unlink()
        eventually(lambda: generation(client) == 2)
        assert passed(client) == NAMES
        assert metric(client, "rulesched_rule_sets") == 0.0


def test_starting_with_no_rules_is_a_warning_and_a_metric(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="rulesched.rules"),
        running_server(settings(tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        assert metric(client, "rulesched_rule_sets") == 0.0
        assert passed(client) == NAMES
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.startswith("no rules are active: every node passes every call")


def test_a_fixed_change_says_so_in_one_info_line(
    rules: Path, server: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    good = (rules / "a.yaml").read_text()
    with caplog.at_level(logging.INFO, logger="rulesched.rules"):
        (rules / "a.yaml").write_text(good.replace("!=", "!=!"))
        rejected(server)
        (rules / "a.yaml").write_text(good)
        eventually(lambda: any(r.getMessage().startswith("rules fixed") for r in caplog.records))
    fixed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rules fixed")]
    assert fixed == ["rules fixed: back to generation 1, which stayed active"]
    assert metric(server, "rulesched_rules_rejected") == 0.0
