"""The HTTP edge over a real server: the founding example, both modes, and every kind of bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.settings import Settings
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, EXAMPLES, RULES
from tests.server import running_server

POD = json.loads((EXAMPLES / "pod.json").read_text())
CLASSIC = ["k8s-master", "k8s-node1", "k8s-node2"]
MASTER_REASON = "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"


def example_nodes() -> list[dict[str, Any]]:
    import yaml

    items: list[dict[str, Any]] = yaml.safe_load(EXAMPLE_NODES.read_text())["items"]
    return [n for n in items if n["metadata"]["name"] in CLASSIC]


@pytest.fixture(scope="module")
def founding_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rules directory with the founding example alone."""
    directory = tmp_path_factory.mktemp("rules")
    (directory / "xy-least-cpu.yaml").write_text((RULES / "xy-least-cpu.yaml").read_text())
    return directory


def settings(rules: Path = RULES, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "rules_dir": rules,
        "nodes_file": EXAMPLE_NODES,
        "metrics_file": EXAMPLE_METRICS,
        "cluster": "off",
    }
    return Settings(**(base | overrides))


@pytest.fixture(scope="module", params=["cpp", "celpy"])
def founding(request: pytest.FixtureRequest, founding_rules: Path) -> Iterator[httpx.Client]:
    with running_server(settings(founding_rules, cel_engine=request.param)) as url, httpx.Client(base_url=url) as c:
        yield c


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with running_server(settings(max_body_bytes=200_000, enable_explain=True)) as url, httpx.Client(base_url=url) as c:
        yield c


def names_args(names: list[str], pod: dict[str, Any] = POD) -> dict[str, Any]:
    return {"Pod": pod, "Nodes": None, "NodeNames": names}


def full_args(nodes: list[dict[str, Any]], pod: dict[str, Any] = POD) -> dict[str, Any]:
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def test_founding_example_in_names_mode(founding: httpx.Client) -> None:
    answer = founding.post("/filter", json=names_args(CLASSIC)).json()
    assert answer == {
        "Nodes": None,
        "NodeNames": ["k8s-node1", "k8s-node2"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {"k8s-master": MASTER_REASON},
        "Error": "",
    }
    scores = founding.post("/prioritize", json=names_args(["k8s-node1", "k8s-node2"])).json()
    assert scores == [{"Host": "k8s-node1", "Score": 0}, {"Host": "k8s-node2", "Score": 10}]


def test_founding_example_in_full_mode_echoes_the_passing_nodes(founding: httpx.Client) -> None:
    nodes = example_nodes()
    answer = founding.post("/filter", json=full_args(nodes)).json()
    assert answer["NodeNames"] is None
    assert answer["Nodes"] == {"metadata": {}, "items": nodes[1:]}
    assert answer["FailedAndUnresolvableNodes"] == {"k8s-master": MASTER_REASON}
    scores = founding.post("/prioritize", json=full_args(nodes[1:])).json()
    assert max(scores, key=lambda s: s["Score"]) == {"Host": "k8s-node2", "Score": 10}


def test_shipped_rules_give_the_least_busy_labelled_node_the_top_score(client: httpx.Client) -> None:
    scores = client.post("/prioritize", json=names_args(["k8s-node1", "k8s-node2"])).json()
    assert max(scores, key=lambda s: s["Score"])["Host"] == "k8s-node2"


def test_requests_are_read_case_insensitively(client: httpx.Client) -> None:
    answer = client.post("/filter", json={"pod": POD, "nodenames": CLASSIC}).json()
    assert answer["NodeNames"] == ["k8s-node1", "k8s-node2"]


def test_unknown_node_in_names_mode_fails_with_a_clear_reason(client: httpx.Client) -> None:
    answer = client.post("/filter", json=names_args(["k8s-node1", "ghost"])).json()
    assert answer["NodeNames"] == ["k8s-node1"]
    assert "ghost" in answer["FailedAndUnresolvableNodes"]
    assert "not found" in answer["FailedAndUnresolvableNodes"]["ghost"]


def test_names_mode_without_a_node_source_says_how_to_register(founding_rules: Path) -> None:
    with running_server(Settings(rules_dir=founding_rules, cluster="off")) as url:
        answer = httpx.post(f"{url}/filter", json=names_args(["k8s-node1"])).json()
    assert "nodeCacheCapable: false" in answer["FailedAndUnresolvableNodes"]["k8s-node1"]


def test_prioritize_scores_an_unknown_node_zero(client: httpx.Client) -> None:
    scores = client.post("/prioritize", json=names_args(["ghost", "k8s-node2"])).json()
    assert scores[0] == {"Host": "ghost", "Score": 0}


BAD_BODIES: list[tuple[str, bytes, str]] = [
    ("empty", b"", "empty request body"),
    ("not json", b"{nope", "not valid JSON"),
    ("array", b"[]", "must be a JSON object"),
    ("no pod", json.dumps({"NodeNames": ["a"]}).encode(), "Pod must be an object"),
    ("pod is a string", json.dumps({"Pod": "x", "NodeNames": ["a"]}).encode(), "Pod must be an object"),
    ("neither nodes nor names", json.dumps({"Pod": POD, "Nodes": None, "NodeNames": None}).encode(), "Nodes"),
    ("items not a list", json.dumps({"Pod": POD, "Nodes": {"items": 3}}).encode(), "Nodes.items must be an array"),
    ("node without name", json.dumps({"Pod": POD, "Nodes": {"items": [{"metadata": {}}]}}).encode(), "metadata.name"),
    ("names not strings", json.dumps({"Pod": POD, "NodeNames": [1]}).encode(), "NodeNames must be an array of strings"),
    ("a name null", json.dumps({"Pod": POD, "NodeNames": ["node-a", None]}).encode(), "NodeNames must be an array"),
]


@pytest.mark.parametrize("verb", ["filter", "prioritize", "explain"])
@pytest.mark.parametrize(("case", "body", "reason"), BAD_BODIES, ids=[c for c, _, _ in BAD_BODIES])
def test_malformed_requests_get_400_with_a_reason(
    client: httpx.Client, verb: str, case: str, body: bytes, reason: str
) -> None:
    response = client.post(f"/{verb}", content=body)
    assert response.status_code == 400
    assert reason in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"Pod": POD, "NodeNameToMetaVictims": {"a": {"Pods": [{"name": "x"}]}}}, "has no UID"),
        ({"Pod": POD, "NodeNameToMetaVictims": {"a": {"Pods": 3}}}, "Pods must be an array"),
        ({"Pod": POD, "NodeNameToVictims": {"a": "x"}}, "must be an object"),
    ],
)
def test_malformed_preempt_gets_400(client: httpx.Client, body: dict[str, Any], reason: str) -> None:
    response = client.post("/preempt", json=body)
    assert response.status_code == 400
    assert reason in response.json()["error"]


def test_malformed_bind_gets_400(client: httpx.Client) -> None:
    response = client.post("/bind", json={"PodName": "p", "PodNamespace": "default", "Node": "n"})
    assert response.status_code == 400
    assert "PodUID" in response.json()["error"]


def test_bind_is_off_by_default_and_says_so(client: httpx.Client) -> None:
    args = {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "k8s-node1"}
    assert client.post("/bind", json=args).json() == {
        "Error": "rulesched does not bind pods: start it with --enable-bind"
    }


def test_body_above_the_limit_gets_413(client: httpx.Client) -> None:
    response = client.post("/filter", content=b"{" + b" " * 300_000 + b"}")
    assert response.status_code == 413
    assert "--max-body-bytes" in response.json()["error"]


def test_preempt_keeps_only_nodes_whose_filters_pass(client: httpx.Client) -> None:
    victims = {
        "k8s-node1": {"Pods": [{"UID": "u1"}], "NumPDBViolations": 0},
        "k8s-master": {"Pods": [{"UID": "u2"}], "NumPDBViolations": 1},
        "ghost": {"Pods": [{"UID": "u3"}], "NumPDBViolations": 0},
    }
    answer = client.post("/preempt", json={"Pod": POD, "NodeNameToVictims": None, "NodeNameToMetaVictims": victims})
    assert answer.json() == {"NodeNameToMetaVictims": {"k8s-node1": {"Pods": [{"UID": "u1"}], "NumPDBViolations": 0}}}


def test_health_and_readiness(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True, "checks": {"rules": True, "nodeCache": True}}


def test_verbs_accept_only_post(client: httpx.Client) -> None:
    assert client.get("/filter").status_code == 405


def test_explain_is_off_unless_enabled(founding: httpx.Client) -> None:
    response = founding.post("/explain", json=names_args(CLASSIC))
    assert response.status_code == 404
    assert "--enable-explain" in response.json()["error"]


def test_explain_shows_every_rule_outcome(client: httpx.Client) -> None:
    report = client.post("/explain", json=names_args(CLASSIC)).json()
    assert report["pod"] == {"namespace": "default", "name": "web-1", "uid": POD["metadata"]["uid"]}
    master = next(n for n in report["nodes"] if n["name"] == "k8s-master")
    assert master["reason"] == MASTER_REASON
    assert report["ranking"][0]["name"] == "k8s-node2"


def test_server_survives_bad_input_and_keeps_answering(client: httpx.Client) -> None:
    for _ in range(20):
        assert client.post("/filter", content=b"\xff\xfe").status_code == 400
    assert client.post("/filter", json=names_args(CLASSIC)).status_code == 200
