"""Shadow rules over a real server: answers never change, and the differences are counted where the issue says.

The live rules are the founding example, the shadow rules change it in the known ways of
`tests/rulebooks.py`; every count asserted below follows from those differences.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.cli import main
from rulesched.settings import Settings
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES
from tests.rulebooks import CLASSIC, LIVE, SHADOW, SURVIVORS, names_args, pod, rules_dir
from tests.server import RunningServer, running

WAIT_SECONDS = 15.0


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "rules_dir": rules_dir(tmp_path / "live", LIVE),
        "nodes_file": EXAMPLE_NODES,
        "metrics_file": EXAMPLE_METRICS,
        "cluster": "off",
        "enable_explain": True,
    }
    return Settings(**(base | overrides))


@pytest.fixture
def shadowed(tmp_path: Path) -> Iterator[RunningServer]:
    with running(settings(tmp_path, shadow_rules_dir=rules_dir(tmp_path / "shadow", SHADOW))) as server:
        yield server


def compared(client: httpx.Client, total: int) -> dict[str, Any]:
    """GET /shadow once `total` calls were compared or dropped (bounded wait)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        summary: dict[str, Any] = client.get("/shadow").json()
        done = sum(sum(counts.values()) for counts in summary["comparisons"].values())
        if done >= total or time.monotonic() > deadline:
            return summary
        time.sleep(0.02)


def traffic() -> list[tuple[str, dict[str, Any]]]:
    """Scheduler-like calls: 4 pods (one a batch pod), each a filter over the classic nodes then a
    prioritize over the two that pass; in names mode."""
    calls = []
    for name, batch in (("web-1", False), ("web-2", False), ("web-3", False), ("job-1", True)):
        calls.append(("/filter", names_args(pod(name, batch=batch), CLASSIC)))
        calls.append(("/prioritize", names_args(pod(name, batch=batch), SURVIVORS)))
    return calls


def answers(server: RunningServer, calls: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    with httpx.Client(base_url=server.url) as client:
        return [client.post(path, json=body).content for path, body in calls]


def full_mode_calls() -> list[tuple[str, dict[str, Any]]]:
    import yaml

    nodes = [n for n in yaml.safe_load(EXAMPLE_NODES.read_text())["items"] if n["metadata"]["name"] in CLASSIC]
    body = {"Pod": pod("full-1"), "Nodes": {"items": nodes}, "NodeNames": None}
    return [("/filter", body), ("/prioritize", body)]


def test_answers_are_the_same_bytes_with_and_without_a_shadow_book(tmp_path: Path) -> None:
    calls = traffic() + full_mode_calls()
    with running(settings(tmp_path)) as plain:
        expected = answers(plain, calls)
    with running(settings(tmp_path, shadow_rules_dir=rules_dir(tmp_path / "shadow", SHADOW))) as shadowed:
        got = answers(shadowed, calls)
        with httpx.Client(base_url=shadowed.url) as client:
            assert sum(compared(client, len(calls))["comparisons"]["filter"].values()) == 5
    assert got == expected
    assert b'"NodeNames":["k8s-node1","k8s-node2"]' in got[0]  # the live rules answered, not the shadow ones


def test_shadow_summary_counts_the_known_differences(shadowed: RunningServer) -> None:
    answers(shadowed, traffic())
    with httpx.Client(base_url=shadowed.url) as client:
        summary = compared(client, 8)
    book = shadowed.parts.app.state.extender.shadow.store.book
    assert summary["book"] == {"generation": 1, "hash": book.hash, "loadedAt": book.loaded_at.isoformat()}
    # Every filter differs on k8s-node1; every prioritize call's top node moves from k8s-node2 to k8s-node1.
    assert summary["comparisons"] == {
        "filter": {"same": 0, "differs": 4, "dropped": 0},
        "prioritize": {"same": 0, "differs": 4, "dropped": 0},
    }
    assert summary["unschedulable"] == {
        "calls": 1,
        "pods": 1,
        "examples": [{"namespace": "default", "name": "job-1", "uid": "uid-job-1"}],
    }
    assert summary["topNodeChanges"] == 4
    # A node is counted under every filter that rejects it: all three nodes fail no-batch for job-1.
    assert summary["rejections"] == {
        "live": {"xy-least-cpu/require-xy-label": 4},
        "shadow": {"xy-least-cpu/require-xy-label": 4, "xy-least-cpu/drain-node1": 4, "xy-least-cpu/no-batch": 3},
    }
    assert summary["queue"] == {"waiting": 0, "capacity": 2048}
    assert summary["lastRejected"] is None
    first_filter, first_prioritize = summary["examples"][0], summary["examples"][1]
    assert first_filter == {
        "verb": "filter",
        "pod": {"namespace": "default", "name": "web-1", "uid": "uid-web-1"},
        "nodesDiffering": 1,
        "nodes": ["k8s-node1"],
        "live": {"passed": 2, "top": None},
        "shadow": {"passed": 1, "top": None},
    }
    assert first_prioritize["live"]["top"] == "k8s-node2"
    assert first_prioritize["shadow"]["top"] == "k8s-node1"
    assert len(summary["examples"]) == 8


def test_metrics_count_comparisons_and_the_shadow_books_rejections(shadowed: RunningServer) -> None:
    answers(shadowed, traffic())
    with httpx.Client(base_url=shadowed.url) as client:
        compared(client, 8)
        text = client.get("/metrics").text
    assert 'rulesched_shadow_comparisons_total{outcome="differs",verb="filter"} 4.0' in text
    assert 'rulesched_shadow_comparisons_total{outcome="differs",verb="prioritize"} 4.0' in text
    assert 'rulesched_shadow_filter_rejections_total{rule="drain-node1",rule_set="xy-least-cpu"} 4.0' in text
    assert 'rulesched_shadow_filter_rejections_total{rule="no-batch",rule_set="xy-least-cpu"} 3.0' in text
    # ...next to the live book's own rejections
    assert 'rulesched_filter_rejections_total{rule="require-xy-label",rule_set="xy-least-cpu"} 4.0' in text
    assert "rulesched_shadow_rules_generation 1.0" in text
    assert 'rulesched_shadow_reloads_total{result="loaded"} 1.0' in text


def test_each_differing_call_is_one_decision_log_line(
    shadowed: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="rulesched.decision"):
        answers(shadowed, traffic()[:2])
        with httpx.Client(base_url=shadowed.url) as client:
            compared(client, 2)
    lines = [r for r in caplog.records if getattr(r, "shadow", False)]
    assert [r.getMessage() for r in lines] == [
        "shadow filter default/web-1 differs on 1 nodes",
        "shadow prioritize default/web-1 differs on 2 nodes",
    ]
    prioritize = lines[1].__dict__
    assert prioritize["nodes"] == ["k8s-node1", "k8s-node2"]
    assert prioritize["live"] == {"generation": 1, "passed": 2, "top": "k8s-node2"}
    assert prioritize["shadowBook"] == {"generation": 1, "passed": 2, "top": "k8s-node1"}


def test_explain_shows_the_shadow_books_view_of_the_same_pod(
    shadowed: RunningServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = names_args(pod("job-1", batch=True), CLASSIC)
    with httpx.Client(base_url=shadowed.url) as client:
        live = client.post("/explain", json=body).json()
        shadow = client.post("/explain", params={"book": "shadow"}, json=body).json()
        assert client.post("/explain", params={"book": "draft"}, json=body).status_code == 400
    assert [n["name"] for n in live["nodes"] if n["passed"]] == SURVIVORS
    assert [n["name"] for n in shadow["nodes"] if n["passed"]] == []
    assert shadow["book"] == "shadow"
    node1 = next(n for n in shadow["nodes"] if n["name"] == "k8s-node1")
    assert node1["reason"] == "k8s-node1 is being drained (rule xy-least-cpu/drain-node1)"
    pod_file = tmp_path / "pod.json"
    pod_file.write_text(json.dumps(pod("job-1", batch=True)))
    argv = ["explain", "--server", shadowed.url, "--pod", str(pod_file), "--node-names", ",".join(CLASSIC)]
    assert main([*argv, "--shadow", "-o", "json"]) == 0
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"] if n["passed"]] == []


def test_a_new_shadow_book_starts_a_new_summary_and_a_broken_one_keeps_the_last_good(tmp_path: Path) -> None:
    # The reloads are this test's own: the directory watcher waits longer than the test takes.
    options = settings(tmp_path, shadow_rules_dir=rules_dir(tmp_path / "shadow", SHADOW), reload_debounce=60)
    with running(options) as shadowed, httpx.Client(base_url=shadowed.url) as client:
        changes_reloaded_by_the_test(shadowed, client, tmp_path)


def changes_reloaded_by_the_test(shadowed: RunningServer, client: httpx.Client, tmp_path: Path) -> None:
    shadow = shadowed.parts.app.state.extender.shadow
    answers(shadowed, traffic()[:2])
    assert compared(client, 2)["comparisons"]["filter"]["differs"] == 1
    (tmp_path / "shadow" / "rules.yaml").write_text(LIVE)
    assert shadow.store.reload() == "loaded"
    summary = client.get("/shadow").json()
    assert summary["book"]["generation"] == 2
    assert summary["comparisons"]["filter"] == {"same": 0, "differs": 0, "dropped": 0}
    answers(shadowed, traffic()[:2])
    assert compared(client, 2)["comparisons"]["filter"] == {"same": 1, "differs": 0, "dropped": 0}
    (tmp_path / "shadow" / "rules.yaml").write_text("kind: RuleSet\nspec: [")
    assert shadow.store.reload() == "rejected"
    summary = client.get("/shadow").json()
    assert summary["book"]["generation"] == 2
    assert summary["lastRejected"]["errors"]
    assert summary["comparisons"]["filter"]["same"] == 1


def test_shadow_rules_that_do_not_load_do_not_stop_the_server(tmp_path: Path) -> None:
    broken = rules_dir(tmp_path / "shadow", "kind: RuleSet\nspec: [")
    with running(settings(tmp_path, shadow_rules_dir=broken)) as server, httpx.Client(base_url=server.url) as client:
        assert client.post("/filter", json=names_args(pod("web-1"), CLASSIC)).status_code == 200
        summary = compared(client, 1)
    assert summary["book"] is None
    assert summary["comparisons"]["filter"] == {"same": 0, "differs": 0, "dropped": 1}
    assert summary["lastRejected"]["errors"]


def test_without_shadow_rules_there_is_no_shadow_summary(tmp_path: Path) -> None:
    with running(settings(tmp_path)) as server, httpx.Client(base_url=server.url) as client:
        answer = client.get("/shadow")
        explain = client.post("/explain", params={"book": "shadow"}, json=names_args(pod("a"), CLASSIC))
    assert answer.status_code == 404
    assert answer.json() == {"error": "no shadow rules: start rulesched serve with --shadow-rules DIR"}
    assert explain.status_code == 404


def test_shadow_answers_carry_the_headers_of_every_json_answer(shadowed: RunningServer, tmp_path: Path) -> None:
    """GET /shadow answers from the controller's own surface exactly as the HTTP edge answers JSON (GET /rules),
    with shadow rules and without (its 404)."""
    with httpx.Client(base_url=shadowed.url) as client:
        answers = [(client.get("/shadow"), client.get("/rules"))]
    with running(settings(tmp_path / "none")) as server, httpx.Client(base_url=server.url) as client:
        answers.append((client.get("/shadow"), client.get("/rules")))
    assert [answer.status_code for answer, _ in answers] == [200, 404]
    for answer, rules in answers:
        assert list(answer.headers.keys()) == list(rules.headers.keys())
        assert answer.headers["content-type"] == rules.headers["content-type"] == "application/json"
        assert int(answer.headers["content-length"]) == len(answer.content)


def test_explain_shadow_needs_a_server_and_a_server_with_shadow_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod_file = tmp_path / "pod.json"
    pod_file.write_text(json.dumps(pod("web-1")))
    local = ["explain", "--rules", str(tmp_path), "--nodes", str(EXAMPLE_NODES), "--pod", str(pod_file), "--shadow"]
    assert main(local) == 2
    usage = "rulesched: --shadow needs --server: locally, give the shadow rules with --rules\n"
    assert capsys.readouterr().err == usage
    with running(settings(tmp_path)) as server:
        argv = ["explain", "--server", server.url, "--pod", str(pod_file), "--node-names", "k8s-node1", "--shadow"]
        assert main(argv) == 1
    lines = capsys.readouterr().err.splitlines()  # the server's own log lines may come first
    assert (
        f"rulesched: {server.url}/explain?book=shadow answered 404: the server has no shadow rules; "
        "start it with --shadow-rules DIR"
    ) in lines


def test_a_recording_of_the_traffic_replayed_against_the_shadow_rules_counts_what_shadow_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shadow_dir = rules_dir(tmp_path / "shadow", SHADOW)
    options = settings(tmp_path, shadow_rules_dir=shadow_dir, record_dir=tmp_path / "recording")
    with running(options) as server, httpx.Client(base_url=server.url) as client:
        answers(server, traffic())
        summary = compared(client, 8)
    capsys.readouterr()
    assert main(["replay", str(tmp_path / "recording"), "--rules", str(shadow_dir), "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["feasibleChanged"] == summary["comparisons"]["filter"]["differs"] == 4
    assert report["unschedulable"] == summary["unschedulable"]["pods"] == 1
    assert report["topNodeChanged"] == summary["topNodeChanges"] == 4
    rejections = {row["rule"]: row["after"] for row in report["rejections"]}
    assert rejections == summary["rejections"]["shadow"]
