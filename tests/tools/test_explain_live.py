"""`rulesched explain NAMESPACE/NAME`: a pod of a running cluster explained on its live state, read by the real
`kubernetes` client from the loopback API (tests/kubeapi.py) through a kubeconfig file; locally or through
`--server`; bound and pending pods; what is missing (403, 404, metrics-server absent) noted, never fatal;
and the kubectl plugin (`kubectl rulesched explain …`) run by the real kubectl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from rulesched.settings import Settings
from rulesched.tools.explain_live import parse_target
from tests.kubeapi import KubeAPI, pod_fixture, wait_for
from tests.server import running_server
from tests.test_deploy import kubectl

RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {name: live}
spec:
  filters:
  - name: labelled
    expression: "'filter.xy.com' in node.metadata.labels"
    message: missing label filter.xy.com
  - name: not-drained
    expression: "!('drain' in node.metadata.labels)"
    message: node is being drained
  - name: wanted
    expression: "!('reject' in pod.metadata.labels)"
    message: the pod asks to be rejected
  scores:
  - name: fewest-pods
    expression: "-double(pods.size())"
  - name: team-known
    expression: "'team.xy.com/name' in namespaceObject.metadata.labels ? 1.0 : 0.0"
"""
BOUND = "fx-beta/sidecar-app"
"""Recorded: bound to node-d (Pending phase: its containers are starting), scheduled by rulesched."""
NODES = ["node-a", "node-b", "node-c", "node-d", "node-e"]


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    directory = tmp_path / "rules"
    directory.mkdir()
    (directory / "live.yaml").write_text(RULES)
    return directory


@pytest.fixture
def kubeconfig(api: KubeAPI, tmp_path: Path) -> Path:
    return api.kubeconfig(tmp_path / "kubeconfig")


def explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    status = main(["explain", *argv, "--output", "json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if status == 0 else {}, captured.err


def test_a_bound_pod_shows_why_it_went_where_it_is(
    rules: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report, _ = explain(capsys, BOUND, "--rules", str(rules), "--kubeconfig", str(kubeconfig))
    assert status == 0
    assert report["pod"] == {
        "namespace": "fx-beta",
        "name": "sidecar-app",
        "uid": "457290b3-3505-42dd-a461-a6e78fd2982f",
    }
    assert [n["name"] for n in report["nodes"]] == NODES  # every node of the cluster, read from the API
    assert {n["name"]: n["passed"] for n in report["nodes"]} == {
        "node-a": True, "node-b": True, "node-c": False, "node-d": True, "node-e": True
    }  # fmt: skip
    live = report["live"]
    assert live["node"] == "node-d"
    assert live["summary"].startswith("bound to node-d: the rules pass it and rank it ")
    assert live["notes"] == []
    # Decided as before it was bound: it is not among the pods of its own node; the other pod there is.
    assert report["nodeContext"]["node-d"]["pods"] == ["fx-alpha/web-0"]
    assert report["namespaceObject"]["metadata"]["labels"]["team.xy.com/name"] == "beta"
    assert report["ranking"][-1]["name"] == "node-d"  # the one node with a pod on it scores lowest


def test_a_bound_pod_on_a_node_the_rules_now_reject(
    api: KubeAPI, rules: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.label_node("node-d", "drain", "now")
    status, report, _ = explain(capsys, BOUND, "--rules", str(rules), "--kubeconfig", str(kubeconfig))
    assert status == 0
    assert report["live"]["summary"].startswith(
        "bound to node-d, which the rules reject now: node is being drained (rule live/not-drained)"
    )


def test_a_pending_pod_shows_why_it_is_pending(
    api: KubeAPI, rules: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put_pod(pod_fixture("e3-pod-get-extender-rejected.json"))  # recorded: pending, with kube-scheduler's reason
    status, report, _ = explain(capsys, "fx-gamma/ext-rejected", "--rules", str(rules), "--kubeconfig", str(kubeconfig))
    assert status == 0
    live = report["live"]
    assert live["node"] is None
    assert live["phase"] == "Pending"
    assert live["summary"].startswith("pending, though the rules let 4 of 5 nodes pass (best: ")
    assert "kube-scheduler said: 0/5 nodes are available: 1 missing label filter.xy.com=yes" in live["summary"]


def test_a_pending_pod_every_node_rejects(
    api: KubeAPI, rules: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add_pod("fx-alpha", "picky", "uid-picky", labels={"app": "picky", "reject": "yes"})
    assert main(["explain", "fx-alpha/picky", "--rules", str(rules), "--kubeconfig", str(kubeconfig)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("Live: phase Pending, not bound, scheduler fixture-none\n")  # the template pod's
    assert "  pending: the rules reject every node (5); each node below says why\n" in table
    assert "node-a: REJECTED: the pod asks to be rejected (rule live/wanted)" in table


def test_what_cannot_be_read_is_noted_and_the_rest_explained(
    api: KubeAPI, rules: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.forbid("pods", "list")
    api.forbid("namespaces", "get")
    api.set_metrics_status(404)
    status, report, _ = explain(capsys, BOUND, "--rules", str(rules), "--kubeconfig", str(kubeconfig))
    assert status == 0
    notes = report["live"]["notes"]
    assert len(notes) == 3
    assert notes[0].startswith('the pods on the nodes: not read (403 pods is forbidden: User "system:kube-scheduler"')
    assert notes[1].startswith("namespace fx-beta: not read (403 namespaces is forbidden")
    assert notes[2].startswith("node metrics (metrics.k8s.io): not read (404 ")
    assert report["nodeContext"]["node-d"]["pods"] == []
    assert report["namespaceObject"]["metadata"]["labels"] == {}  # as the rules see a namespace not known


def test_a_pod_that_is_not_there_is_a_clear_error(
    kubeconfig: Path, rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = explain(capsys, "fx-beta/nope", "--rules", str(rules), "--kubeconfig", str(kubeconfig))
    assert status == 1
    assert err.startswith('rulesched: pod fx-beta/nope: not found (pods "nope" not found) at Kubernetes API http://')


def test_an_unreachable_api_is_a_clear_error(
    api: KubeAPI, rules: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.go_down()
    status, _, err = explain(capsys, BOUND, "--rules", str(rules), "--kubeconfig", str(kubeconfig))
    assert status == 1
    assert err.startswith(f"rulesched: cannot read pod {BOUND} from Kubernetes API http://")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [BOUND, "--pod", "p.json", "--rules", "r"],
            "NAMESPACE/NAME reads the pod and the cluster from the API: drop --pod",
        ),
        ([BOUND], "explain NAMESPACE/NAME needs --rules (or --server URL)"),
        ([BOUND, "--server", "http://127.0.0.1:1", "--rules", "r"], "takes the server's rules: drop --rules"),
        ([BOUND, "--rules", "r", "--send-nodes"], "--shadow and --send-nodes need --server"),
        (["--rules", "r", "--nodes", "n"], "explain needs a pod: NAMESPACE/NAME (from the cluster) or --pod FILE"),
        (["--pod", "p", "--rules", "r", "--kubeconfig", "k"], "--kubeconfig and --send-nodes go with NAMESPACE/NAME"),
    ],
)
def test_flags_that_do_not_go_together_are_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_target_is_namespace_and_name() -> None:
    assert parse_target("fx-beta/web") == ("fx-beta", "web")
    assert parse_target("web") == ("default", "web")
    with pytest.raises(ValueError, match="want NAMESPACE/NAME"):
        parse_target("a/b/c")


@pytest.fixture
def server(api: KubeAPI, rules: Path, kubeconfig: Path) -> Iterator[str]:
    settings = Settings(rules_dir=rules, kubeconfig=kubeconfig, cluster="on", enable_explain=True)
    with running_server(settings) as url:
        yield url


@pytest.mark.parametrize("send_nodes", [False, True], ids=["names", "full"])
def test_through_the_server_with_the_nodes_filled_in(
    server: str, kubeconfig: Path, send_nodes: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [BOUND, "--server", server, "--kubeconfig", str(kubeconfig), *(["--send-nodes"] if send_nodes else [])]
    wait_for(lambda: explain(capsys, *argv)[1].get("ranking", []) != [], timeout=10, what="the server's caches")
    status, report, _ = explain(capsys, *argv)
    assert status == 0
    assert [n["name"] for n in report["nodes"]] == NODES
    assert report["live"]["summary"].startswith("bound to node-d: the rules pass it and rank it ")
    # The server's own pod cache has the pod bound: through --server it counts among its node's pods.
    assert report["nodeContext"]["node-d"]["pods"] == ["fx-alpha/web-0", "fx-beta/sidecar-app"]


def test_kubectl_runs_the_plugin(rules: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plugin = Path(sys.executable).parent / "kubectl-rulesched"
    assert plugin.is_file(), "pip install -e . makes the kubectl-rulesched console script"
    environ = {
        **os.environ,
        "PATH": f"{plugin.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(kubeconfig),
    }
    done = subprocess.run(
        [kubectl(), "rulesched", "explain", BOUND, "--rules", str(rules)],
        capture_output=True, text=True, timeout=120, env=environ, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert main(["explain", BOUND, "--rules", str(rules), "--kubeconfig", str(kubeconfig)]) == 0
    assert done.stdout == capsys.readouterr().out
    assert done.stdout.startswith("Live: phase Pending, node-d, scheduler rulesched\n")
