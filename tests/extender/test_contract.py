"""The wire contract: every request a real kube-scheduler sent (v1.32 and v1.36, the oldest and newest
versions supported), replayed through a real server.

Each answer is checked against PROTOCOL.md: exact Go field names, `null` for the unused mode's
field, passing nodes echoed unchanged in full mode, names only in names mode, every candidate
accounted for exactly once, integer scores 0..10 for every host asked about, victims as UIDs taken
from the request. The shipped rules decide: nodes without the `filter.xy.com` label are rejected.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rulesched.settings import Settings
from tests.paths import RULES, SCHEDULER_FIXTURES, SCHEDULER_FIXTURES_NEWEST
from tests.server import running_server

VERSIONS = (SCHEDULER_FIXTURES, SCHEDULER_FIXTURES_NEWEST)
SCENARIOS = sorted(p for version in VERSIONS for p in version.iterdir() if p.is_dir())
FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def requests(scenario: Path) -> list[Path]:
    """The scenario's requests in the order the scheduler sent them (bind excluded: it needs an API)."""
    found = [p for p in scenario.glob("*.json") if p.stem.split("-")[0] in {"filter", "prioritize", "preempt"}]
    found = [p for p in found if not p.name.endswith((".response.json", ".meta.json"))]
    # Captures are numbered per verb; a filter precedes the prioritize and preempt calls it enables.
    order = {"filter": 0, "prioritize": 1, "preempt": 2}
    return sorted(found, key=lambda p: (int(p.stem.split("-")[1]), order[p.stem.split("-")[0]]))


def node_cache_capable(scenario: Path) -> bool:
    config = yaml.safe_load((scenario / "scheduler-config.yaml").read_text())
    return bool(config["extenders"][0]["nodeCacheCapable"])


def all_fixture_nodes() -> dict[str, Any]:
    """Every node object the scheduler sent in full mode, as a NodeList (the names-mode node source)."""
    nodes: dict[str, Any] = {}
    for path in sorted(p for version in VERSIONS for p in version.glob("*/filter-*.json")):
        if path.name.endswith((".response.json", ".meta.json")):
            continue
        body = json.loads(path.read_text())
        for node in (body.get("Nodes") or {}).get("items") or []:
            nodes[node["metadata"]["name"]] = node
    return {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": list(nodes.values())}


def labelled(node: dict[str, Any]) -> bool:
    return "filter.xy.com" in (node["metadata"].get("labels") or {})


@pytest.fixture(scope="module")
def node_list(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    node_list = all_fixture_nodes()
    path = tmp_path_factory.mktemp("nodes") / "nodes.json"
    path.write_text(json.dumps(node_list))
    return path, {n["metadata"]["name"]: n for n in node_list["items"]}


@pytest.fixture(scope="module", params=["cpp", "celpy"])
def servers(request: pytest.FixtureRequest, node_list: tuple[Path, dict[str, Any]]) -> Iterator[dict[bool, str]]:
    """One server per mode: names mode has the fixture nodes as its node source, full mode has none."""
    engine = request.param
    names = Settings(rules_dir=RULES, nodes_file=node_list[0], cluster="off", cel_engine=engine)
    full = Settings(rules_dir=RULES, cluster="off", cel_engine=engine)
    with running_server(names) as names_url, running_server(full) as full_url:
        yield {True: names_url, False: full_url}


def scenario_id(scenario: Path) -> str:
    return f"{scenario.parent.name.removeprefix('kube-scheduler-')}/{scenario.name}"


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if requests(s)], ids=scenario_id)
def test_real_scheduler_traffic_gets_valid_answers(
    scenario: Path, servers: dict[bool, str], node_list: tuple[Path, dict[str, Any]]
) -> None:
    cache_capable = node_cache_capable(scenario)
    with httpx.Client(base_url=servers[cache_capable], timeout=10) as client:
        for path in requests(scenario):
            body = path.read_bytes()
            verb = path.stem.split("-")[0]
            response = client.post(f"/{verb}", content=body, headers={"Content-Type": "application/json"})
            assert response.status_code == 200, f"{path.name}: {response.text}"
            assert response.headers["content-type"] == "application/json"
            CHECKS[verb](json.loads(body), response.json(), node_list[1], path.name)


def check_filter(request: dict[str, Any], answer: dict[str, Any], nodes: dict[str, Any], name: str) -> None:
    assert set(answer) == FILTER_KEYS, name
    assert answer["Error"] == ""
    full = request["Nodes"] is not None
    sent = [n["metadata"]["name"] for n in request["Nodes"]["items"]] if full else request["NodeNames"]
    if full:
        assert answer["NodeNames"] is None
        assert answer["Nodes"]["metadata"] == {}
        passed = [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
        by_name = {n["metadata"]["name"]: n for n in request["Nodes"]["items"]}
        assert all(n == by_name[n["metadata"]["name"]] for n in answer["Nodes"]["items"]), "echoed unchanged"
    else:
        assert answer["Nodes"] is None
        passed = answer["NodeNames"]
    failed, unresolvable = answer["FailedNodes"], answer["FailedAndUnresolvableNodes"]
    assert sorted([*passed, *failed, *unresolvable]) == sorted(sent), "each candidate exactly once"
    assert passed == [n for n in sent if n in set(passed)], "request order kept"
    source = {n["metadata"]["name"]: n for n in request["Nodes"]["items"]} if full else nodes
    assert set(passed) == {n for n in sent if labelled(source[n])}
    for reason in [*failed.values(), *unresolvable.values()]:
        assert reason == "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"
        assert "%" not in reason


def check_prioritize(request: dict[str, Any], answer: list[dict[str, Any]], nodes: dict[str, Any], name: str) -> None:
    full = request["Nodes"] is not None
    sent = [n["metadata"]["name"] for n in request["Nodes"]["items"]] if full else request["NodeNames"]
    assert isinstance(answer, list), name
    assert [entry["Host"] for entry in answer] == sent
    for entry in answer:
        assert set(entry) == {"Host", "Score"}
        assert type(entry["Score"]) is int
        assert 0 <= entry["Score"] <= 10


def check_preempt(request: dict[str, Any], answer: dict[str, Any], nodes: dict[str, Any], name: str) -> None:
    assert set(answer) == {"NodeNameToMetaVictims"}, name
    meta = request.get("NodeNameToMetaVictims")
    full = request.get("NodeNameToVictims")
    sent: dict[str, Any] = meta or full or {}
    assert set(answer["NodeNameToMetaVictims"]) <= set(sent)
    assert answer["NodeNameToMetaVictims"], "labelled nodes stay acceptable"
    for node, victims in answer["NodeNameToMetaVictims"].items():
        assert set(victims) == {"Pods", "NumPDBViolations"}
        if meta:
            want = [p["UID"] for p in meta[node]["Pods"]]
        else:
            want = [p["metadata"]["uid"] for p in sent[node]["Pods"]]
        assert [p["UID"] for p in victims["Pods"]] == want
        assert all(set(p) == {"UID"} for p in victims["Pods"])
        assert victims["NumPDBViolations"] == sent[node]["NumPDBViolations"]


CHECKS: dict[str, Any] = {"filter": check_filter, "prioritize": check_prioritize, "preempt": check_preempt}
