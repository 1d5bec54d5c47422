"""`rulesched explain`: the founding example explained locally (table, JSON, both engines) and by a server."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.sources import FileMetricsSource, read_document
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call
from rulesched.rules.cel import make_engine
from rulesched.rules.context import context_report
from rulesched.rules.estimate import fallback_estimate
from rulesched.rules.loader import load_rule_book
from rulesched.settings import Settings
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, EXAMPLES, RULES
from tests.server import running_server

POD = EXAMPLES / "pod.json"
LOCAL = ["--rules", str(RULES), "--pod", str(POD), "--nodes", str(EXAMPLE_NODES), "--metrics", str(EXAMPLE_METRICS)]


def explain_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["explain", *args, "--output", "json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["name"]: node for node in report["nodes"]}


def test_explain_json_is_the_engines_decision(capsys: pytest.CaptureFixture[str]) -> None:
    report = explain_json(capsys, *LOCAL)
    pod = read_document(POD)
    book = load_rule_book([RULES], make_engine("cpp"))
    metrics = FileMetricsSource(EXAMPLE_METRICS)
    built = NodeContexts(None, metrics, None, metrics.custom)
    contexts = built.for_objects(read_document(EXAMPLE_NODES)["items"])
    estimate = fallback_estimate(pod)
    expected = evaluate(prepared(book), Call(pod, contexts)).explain(pod) | context_report(
        pod, None, contexts, built.custom_ages, estimate
    )
    assert report == expected


def test_explain_shows_each_custom_value_and_its_age(capsys: pytest.CaptureFixture[str]) -> None:
    """The example snapshot carries `metrics.custom.cpu5m`; a file's values are taken as current (no age)."""
    custom = {name: node["custom"] for name, node in explain_json(capsys, *LOCAL)["nodeContext"].items()}
    assert custom == {
        "k8s-master": {"cpu5m": {"value": 0.35, "age": None}},
        "k8s-node1": {"cpu5m": {"value": 0.62, "age": None}},
        "k8s-node2": {"cpu5m": {"value": 0.91, "age": None}},
        "gpu-node1": {},
    }


def test_explain_json_for_the_founding_example(capsys: pytest.CaptureFixture[str]) -> None:
    report = explain_json(capsys, *LOCAL)
    nodes = by_name(report)
    assert report["pod"] == {"namespace": "default", "name": "web-1", "uid": "3c0ffee0-0000-4000-8000-000000000001"}
    assert report["appliedRuleSets"] == ["gpu-reserve", "memory-pressure", "xy-least-cpu"]
    assert report["ranking"] == [{"name": "k8s-node2", "score": 9}, {"name": "k8s-node1", "score": 2}]
    assert nodes["k8s-master"]["passed"] is False
    assert nodes["k8s-master"]["reason"] == "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"
    least_cpu = {s["rule"]: s for s in nodes["k8s-node2"]["scores"]}["least-cpu"]
    assert least_cpu == {
        "ruleSet": "xy-least-cpu",
        "rule": "least-cpu",
        "mode": "Enforce",
        "weight": 1,
        "raw": -0.067,
        "normalized": 10.0,
        "error": None,
    }


def test_explain_gives_the_same_json_on_both_engines(capsys: pytest.CaptureFixture[str]) -> None:
    cpp = explain_json(capsys, *LOCAL, "--cel-engine", "cpp")
    celpy = explain_json(capsys, *LOCAL, "--cel-engine", "celpy")
    assert cpp == celpy


def test_explain_table_has_a_block_per_node_and_the_ranking(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", *LOCAL]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Pod default/web-1 (uid 3c0ffee0-0000-4000-8000-000000000001)"
    assert lines[1] == "Rule sets applied: gpu-reserve, memory-pressure, xy-least-cpu (rules generation 1)"
    assert (
        "k8s-master: REJECTED: missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"
        " [preemption will not help]"
    ) in lines
    assert "k8s-node2: passed, score 9" in lines
    assert "  xy-least-cpu/require-xy-label            Enforce  FAIL    missing label filter.xy.com" in lines
    assert "  memory-pressure/memory-below-75-percent  Audit    pass" in lines
    assert "  xy-least-cpu/least-cpu            Enforce  -0.067   10.00       1" in lines
    assert lines[-4:] == [
        "Ranking (best first):",
        "  1.  k8s-node2  score 9",
        "  2.  k8s-node1  score 2",
        "Rejected: k8s-master, gpu-node1",
    ]


def test_explain_reads_the_pod_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(POD.read_text()))
    args = [a if a != str(POD) else "-" for a in LOCAL]
    assert explain_json(capsys, *args)["ranking"][0] == {"name": "k8s-node2", "score": 9}


def test_explain_without_rule_sets_applying_passes_every_node(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("metadata: {name: coredns, namespace: kube-system}\nspec: {containers: []}\n")
    report = explain_json(
        capsys, "--rules", str(RULES / "xy-least-cpu.yaml"), "--pod", str(pod), "--nodes", str(EXAMPLE_NODES)
    )
    assert report["appliedRuleSets"] == []
    assert all(node["passed"] and node["score"] == 0 for node in report["nodes"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pod", str(POD), "--nodes", str(EXAMPLE_NODES)], "explain needs --rules and --nodes"),
        (["--rules", str(RULES), "--pod", str(POD), "--node-names", "a"], "--node-names needs --server"),
        (["--server", "http://127.0.0.1:1", "--pod", str(POD)], "needs --node-names (names mode) or --nodes"),
        (["--server", "http://x", "--pod", str(POD), "--node-names", "a", "--rules", "r"], "drop --rules"),
    ],
)
def test_explain_refuses_incomplete_flags(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["explain", *args]) == 2
    assert message in capsys.readouterr().err


def test_explain_names_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["--rules", str(RULES), "--pod", str(tmp_path / "nope.json"), "--nodes", str(EXAMPLE_NODES)]
    assert main(["explain", *args]) == 1
    assert f"{tmp_path / 'nope.json'}: cannot read" in capsys.readouterr().err


def test_explain_reports_rules_that_do_not_load(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("apiVersion: rulesched.io/v1alpha1\nkind: RuleSet\nmetadata: {name: x}\n")
    assert main(["explain", "--rules", str(tmp_path), "--pod", str(POD), "--nodes", str(EXAMPLE_NODES)]) == 1
    assert f"{tmp_path / 'bad.yaml'}:1: x: spec: Field required" in capsys.readouterr().err


# --- server mode ---------------------------------------------------------------------------------


def test_explain_asks_a_real_server_in_names_mode(capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(
        rules_dir=RULES, nodes_file=EXAMPLE_NODES, metrics_file=EXAMPLE_METRICS, enable_explain=True, cluster="off"
    )
    local = explain_json(capsys, *LOCAL)
    with running_server(settings) as url:
        names = "k8s-master,k8s-node1,k8s-node2,gpu-node1"
        remote = explain_json(capsys, "--server", url, "--pod", str(POD), "--node-names", names)
        assert main(["explain", "--server", url, "--pod", str(POD), "--nodes", str(EXAMPLE_NODES)]) == 0
    assert {k: v for k, v in remote.items() if k != "unknownNodes"} == local
    assert "  1.  k8s-node2  score 9" in capsys.readouterr().out


def test_explain_says_how_to_enable_explain_on_the_server(capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(rules_dir=RULES, nodes_file=EXAMPLE_NODES, cluster="off")
    with running_server(settings) as url:
        assert main(["explain", "--server", url, "--pod", str(POD), "--node-names", "k8s-node1"]) == 1
    assert "start the server with --enable-explain" in capsys.readouterr().err


def test_explain_says_when_the_server_is_unreachable(capsys: pytest.CaptureFixture[str], closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    assert main(["explain", "--server", url, "--pod", str(POD), "--node-names", "k8s-node1"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach {url}/explain" in err
    assert "is `rulesched serve` running there?" in err


class Recorder(BaseHTTPRequestHandler):
    """Records each request body and answers with the canned status and body of the server."""

    def do_POST(self) -> None:
        server: RecordingServer = self.server  # type: ignore[assignment]
        server.requests.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
        self.send_response(server.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(server.answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class RecordingServer(HTTPServer):
    def __init__(self, status: int, answer: bytes) -> None:
        super().__init__(("127.0.0.1", 0), Recorder)
        self.status = status
        self.answer = answer
        self.requests: list[tuple[str, Any]] = []


@pytest.fixture
def recorder() -> Iterator[RecordingServer]:
    server = RecordingServer(200, json.dumps({"pod": {}, "nodes": [], "ranking": []}).encode())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def url_of(server: RecordingServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/"


def test_explain_sends_extender_args_in_names_mode(recorder: RecordingServer) -> None:
    assert main(["explain", "--server", url_of(recorder), "--pod", str(POD), "--node-names", "a, b,c"]) == 0
    path, body = recorder.requests[0]
    assert path == "/explain"
    assert body == {"Pod": read_document(POD), "Nodes": None, "NodeNames": ["a", "b", "c"]}


def test_explain_sends_extender_args_in_full_mode(recorder: RecordingServer) -> None:
    assert main(["explain", "--server", url_of(recorder), "--pod", str(POD), "--nodes", str(EXAMPLE_NODES)]) == 0
    _, body = recorder.requests[0]
    items = read_document(EXAMPLE_NODES)["items"]
    assert body == {"Pod": read_document(POD), "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}


@pytest.mark.parametrize(
    ("status", "answer", "message"),
    [
        (500, b'{"error": "boom"}', 'answered HTTP 500: {"error": "boom"}'),
        (200, b"<html>", "answered something that is not JSON"),
        (200, b"[]", "answered JSON that is not an explain report"),
    ],
)
def test_explain_reports_a_bad_answer(
    capsys: pytest.CaptureFixture[str], recorder: RecordingServer, status: int, answer: bytes, message: str
) -> None:
    recorder.status, recorder.answer = status, answer
    assert main(["explain", "--server", url_of(recorder), "--pod", str(POD), "--node-names", "a"]) == 1
    assert message in capsys.readouterr().err


def test_local_explain_shows_the_pods_and_the_namespace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps({"metadata": {"name": "etl-3", "namespace": "ml-team", "labels": {"app": "etl"}}}))
    files = [
        "--pods",
        str(EXAMPLES / "cluster" / "pods.yaml"),
        "--namespaces",
        str(EXAMPLES / "cluster" / "namespaces.yaml"),
    ]
    report = explain_json(capsys, "--rules", str(RULES), "--pod", str(pod), "--nodes", str(EXAMPLE_NODES), *files)
    assert report["namespaceObject"]["metadata"]["labels"]["pool.xy.com/target"] == "gpu"
    assert "team-pools" in report["appliedRuleSets"]
    assert report["nodeContext"]["k8s-node1"]["pods"] == ["default/etl-0", "default/etl-1"]
    assert report["nodeContext"]["k8s-node1"]["allocated"]["pods"] == 2
    assert main(["explain", "--server", "http://127.0.0.1:1", "--pod", str(pod), "--node-names", "a", *files]) == 2
