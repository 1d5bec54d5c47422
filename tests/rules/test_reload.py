"""Hot reload under a running server: ConfigMap `..data` swaps, plain edits, deletions, broken sets,
and requests in flight while the rules change. Also what /rules, /metrics and the decision log show.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.extender.logformat import JsonFormatter
from rulesched.settings import Settings
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES
from tests.server import running_server

NAMES = ["k8s-master", "k8s-node1", "k8s-node2"]
POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"}, "spec": {"containers": []}}
WAIT_SECONDS = 10.0


def reject(rule_set: str, node: str) -> str:
    return f"""\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: {rule_set}
spec:
  filters:
  - name: not-{node}
    expression: node.metadata.name != '{node}'
    message: {node} is excluded
"""


BROKEN = reject("broken", "k8s-node1").replace("node.metadata.name !=", "node.metadata.name !=!")


class ConfigMapVolume:
    """A directory written exactly as the kubelet's atomic writer writes a ConfigMap volume."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0

    def write(self, files: dict[str, str]) -> None:
        self.count += 1
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y_%m_%d_%H_%M_%S")
        new = self.root / f"..{stamp}.{self.count:09d}"
        new.mkdir()
        for name, text in files.items():
            (new / name).write_text(text)
        old = os.readlink(self.root / "..data") if (self.root / "..data").is_symlink() else None
        (self.root / "..data_tmp").symlink_to(new.name)
        os.replace(self.root / "..data_tmp", self.root / "..data")
        for name in files:
            if not (self.root / name).is_symlink():
                (self.root / name).symlink_to(f"..data/{name}")
        for entry in self.root.iterdir():
            if not entry.name.startswith(".") and entry.name not in files:
                entry.unlink()
        if old:
            for child in (self.root / old).iterdir():
                child.unlink()
            (self.root / old).rmdir()


def settings(rules: Path, **extra: Any) -> Settings:
    """A server of the example cluster's files that notices a change of `rules` quickly, with `extra` settings."""
    return Settings(
        rules_dir=rules,
        nodes_file=EXAMPLE_NODES,
        metrics_file=EXAMPLE_METRICS,
        cluster="off",
        reload_debounce=0.05,
        **extra,
    )


@pytest.fixture
def volume(tmp_path: Path) -> ConfigMapVolume:
    root = tmp_path / "rules"
    root.mkdir()
    volume = ConfigMapVolume(root)
    volume.write({"a.yaml": reject("a", "k8s-node1"), "b.yaml": reject("b", "k8s-master")})
    return volume


@pytest.fixture
def server(volume: ConfigMapVolume) -> Iterator[httpx.Client]:
    with running_server(settings(volume.root)) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def passed(client: httpx.Client) -> list[str]:
    response = client.post("/filter", json={"Pod": POD, "NodeNames": NAMES})
    assert response.status_code == 200
    names: list[str] = response.json()["NodeNames"]
    return names


def eventually(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "the change was not picked up in time"
        time.sleep(0.05)


def metric(client: httpx.Client, line_start: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_configmap_swap_changes_the_next_decision(volume: ConfigMapVolume, server: httpx.Client) -> None:
    assert passed(server) == ["k8s-node2"]
    volume.write({"a.yaml": reject("a", "k8s-node2"), "b.yaml": reject("b", "k8s-master")})
    eventually(lambda: passed(server) == ["k8s-node1"])
    assert server.get("/rules").json()["active"]["generation"] == 2


def test_a_broken_swap_keeps_the_old_rules_and_is_reported(volume: ConfigMapVolume, server: httpx.Client) -> None:
    volume.write({"a.yaml": BROKEN, "b.yaml": reject("b", "k8s-node2")})
    eventually(lambda: server.get("/rules").json()["lastRejected"] is not None)
    assert passed(server) == ["k8s-node2"]
    status = server.get("/rules").json()
    assert status["active"]["generation"] == 1
    [error] = status["lastRejected"]["errors"]
    assert error["file"].endswith("a.yaml")
    assert error["ruleSet"] == "broken"
    assert error["rule"] == "not-k8s-node1"
    assert error["field"] == "spec.filters[0].expression"
    assert server.get("/readyz").json()["ready"] is True
    assert metric(server, 'rulesched_reloads_total{result="rejected"}') == 1.0
    assert metric(server, "rulesched_rules_generation") == 1.0


def test_deleting_a_rule_file_removes_its_rules(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(reject("a", "k8s-node1"))
    (tmp_path / "b.yaml").write_text(reject("b", "k8s-master"))
    with running_server(settings(tmp_path)) as url, httpx.Client(base_url=url) as client:
        assert passed(client) == ["k8s-node2"]
        (tmp_path / "b.yaml").unlink()
        eventually(lambda: passed(client) == ["k8s-master", "k8s-node2"])
        assert [rs["name"] for rs in client.get("/rules").json()["active"]["ruleSets"]] == ["a"]


def test_a_plain_edit_reloads_and_an_unchanged_file_does_not(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(reject("a", "k8s-node1"))
    with running_server(settings(tmp_path)) as url, httpx.Client(base_url=url) as client:
        (tmp_path / "a.yaml").write_text(reject("a", "k8s-node1"))
        eventually(lambda: metric(client, 'rulesched_reloads_total{result="unchanged"}') >= 1.0)
        assert client.get("/rules").json()["active"]["generation"] == 1
        (tmp_path / "a.yaml").write_text(reject("a", "k8s-node2"))
        eventually(lambda: passed(client) == ["k8s-master", "k8s-node1"])
        assert client.get("/rules").json()["active"]["generation"] == 2


def test_requests_during_a_stream_of_reloads_each_see_one_generation(
    volume: ConfigMapVolume, server: httpx.Client
) -> None:
    # Two files that change together: a mix of generations would reject one node of each version.
    versions = [
        {"a.yaml": reject("a", "k8s-node1"), "b.yaml": reject("b", "k8s-master")},
        {"a.yaml": reject("a", "k8s-node2"), "b.yaml": reject("b", "k8s-node1")},
    ]
    consistent = [["k8s-node2"], ["k8s-master"]]
    answers: list[Any] = []
    stop = threading.Event()

    def ask() -> None:
        with httpx.Client(base_url=str(server.base_url), timeout=10) as client:
            for _ in range(2000):
                if stop.is_set():
                    return
                answers.append(passed(client))

    askers = [threading.Thread(target=ask) for _ in range(3)]
    for thread in askers:
        thread.start()
    for swap in range(20):
        volume.write(versions[(swap + 1) % 2])
        time.sleep(0.1)
    stop.set()
    for thread in askers:
        thread.join(WAIT_SECONDS)
    assert len(answers) > 50
    assert [a for a in answers if a not in consistent] == []
    assert {tuple(a) for a in answers} == {("k8s-node2",), ("k8s-master",)}, "both versions were served"


def test_metrics_carry_the_documented_series(server: httpx.Client) -> None:
    passed(server)
    server.post("/prioritize", json={"Pod": POD, "NodeNames": ["k8s-node2"]})
    server.post("/filter", content=b"nonsense")
    text = server.get("/metrics").text
    for series in [
        'rulesched_requests_total{code="200",verb="filter"} 1.0',
        'rulesched_requests_total{code="400",verb="filter"} 1.0',
        'rulesched_requests_total{code="200",verb="prioritize"} 1.0',
        'rulesched_request_duration_seconds_count{verb="filter"} 2.0',
        'rulesched_candidate_nodes_count{verb="filter"} 1.0',
        'rulesched_candidate_nodes_sum{verb="filter"} 3.0',
        'rulesched_filter_rejections_total{rule="not-k8s-node1",rule_set="a"} 1.0',
        'rulesched_filter_rejections_total{rule="not-k8s-master",rule_set="b"} 1.0',
        'rulesched_reloads_total{result="loaded"} 1.0',
        "rulesched_rules_generation 1.0",
        "rulesched_node_cache_nodes 4.0",
    ]:
        assert series in text, series
    assert 0 <= metric(server, "rulesched_seconds_since_last_reload") < 60


def test_audit_rejections_and_rule_errors_are_counted(tmp_path: Path) -> None:
    (tmp_path / "audit.yaml").write_text(
        reject("audit", "k8s-node1").replace("    message:", "    mode: Audit\n    message:")
        + "  - name: broken-lookup\n    expression: node.metadata.labels['nope'] == 'x'\n    failurePolicy: Ignore\n"
    )
    with running_server(settings(tmp_path)) as url, httpx.Client(base_url=url) as client:
        assert passed(client) == NAMES
        text = client.get("/metrics").text
    assert 'rulesched_audit_rejections_total{rule="not-k8s-node1",rule_set="audit"} 1.0' in text
    assert 'rulesched_rule_errors_total{rule="broken-lookup",rule_set="audit"} 3.0' in text


def test_one_decision_log_line_per_call_with_the_documented_fields(
    server: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="rulesched.decision"):
        passed(server)
        server.post("/prioritize", json={"Pod": POD, "NodeNames": ["k8s-master", "k8s-node2"]})
        server.get("/healthz")  # a call's decision line is written after its answer, before the next call's
    lines = [r for r in caplog.records if r.name == "rulesched.decision" and r.levelno == logging.INFO]
    assert [r.getMessage() for r in lines] == [
        "filter default/p: 1 of 3 nodes passed",
        "prioritize default/p: 2 of 2 nodes passed",
    ]
    filtered = json.loads(JsonFormatter().format(lines[0]))
    assert filtered["pod"] == {"namespace": "default", "name": "p", "uid": "u-1"}
    assert filtered["verb"] == "filter"
    assert filtered["candidates"] == 3
    assert filtered["passed"] == 1
    assert filtered["rejections"] == {"a/not-k8s-node1": 1, "b/not-k8s-master": 1}
    assert filtered["generation"] == 1
    assert filtered["durationMs"] >= 0
    assert filtered["level"] == "info"
    assert [t["node"] for t in lines[1].__dict__["top"]] == ["k8s-master", "k8s-node2"]
    details = [r for r in caplog.records if r.name == "rulesched.decision" and r.levelno == logging.DEBUG]
    assert len(details) == 5
    assert details[0].__dict__["node"]["name"] == "k8s-master"


def test_one_rules_file_is_served_and_reloaded(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(reject("a", "k8s-node1"))
    (tmp_path / "other.yaml").write_text(reject("other", "k8s-master"))  # beside it, not given: never loaded
    with running_server(settings(tmp_path / "a.yaml")) as url, httpx.Client(base_url=url) as client:
        assert passed(client) == ["k8s-master", "k8s-node2"]
        (tmp_path / "a.yaml").write_text(reject("a", "k8s-node2"))
        eventually(lambda: passed(client) == ["k8s-master", "k8s-node1"])
        assert client.get("/rules").json()["active"]["files"] == [str(tmp_path / "a.yaml")]


def test_a_repeated_rule_set_name_is_blamed_on_the_file_that_brought_it(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(reject("same", "k8s-node1"))
    with running_server(settings(tmp_path)) as url, httpx.Client(base_url=url) as client:
        (tmp_path / "a-new.yaml").write_text(reject("same", "k8s-master"))  # read first: it sorts first
        eventually(lambda: client.get("/rules").json()["lastRejected"] is not None)
        [error] = client.get("/rules").json()["lastRejected"]["errors"]
    assert error["file"] == str(tmp_path / "a-new.yaml")
    assert error["message"] == f"duplicate rule set name, already defined in {tmp_path / 'b.yaml'}"


def test_several_rules_paths_are_one_set_of_rules_each_reloaded(tmp_path: Path) -> None:
    (tmp_path / "team-a").mkdir()
    (tmp_path / "team-a" / "a.yaml").write_text(reject("a", "k8s-node1"))
    (tmp_path / "b.yaml").write_text(reject("b", "k8s-master"))
    paths = (tmp_path / "team-a", tmp_path / "b.yaml")
    with (
        running_server(settings(tmp_path).model_copy(update={"rules_dir": paths})) as url,
        httpx.Client(base_url=url) as client,
    ):
        assert passed(client) == ["k8s-node2"]
        (tmp_path / "b.yaml").write_text(reject("b", "k8s-node2"))
        eventually(lambda: passed(client) == ["k8s-master"])
        (tmp_path / "team-a" / "a.yaml").write_text(reject("a", "k8s-master"))
        eventually(lambda: passed(client) == ["k8s-node1"])
