"""Full mode over HTTP: a node sent without a resourceVersion is decided on the body sent, call after call, when
one name comes with two different bodies in turn (the node's context is keyed by its content)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from rulesched.settings import Settings
from tests.rulebooks import LIVE, pod, rules_dir
from tests.server import running

CALLS = 200


def node(labelled: bool) -> dict[str, Any]:
    """`k8s-node1` without a resourceVersion: with the founding example's label, or with another one."""
    labels = {"filter.xy.com": "yes"} if labelled else {"other.xy.com": "yes"}
    resources = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    return {
        "metadata": {"name": "k8s-node1", "labels": labels},
        "status": {"capacity": resources, "allocatable": resources},
    }


def test_back_to_back_calls_with_two_bodies_for_one_node_name_get_each_bodys_answer(tmp_path: Path) -> None:
    settings = Settings(rules_dir=rules_dir(tmp_path / "rules", LIVE), cluster="off")
    answers = []
    with running(settings) as server, httpx.Client(base_url=server.url) as client:
        for index in range(CALLS):
            body = {"Pod": pod("web"), "Nodes": {"items": [node(index % 2 == 0)]}, "NodeNames": None}
            answer = client.post("/filter", json=body).json()
            answers.append([n["metadata"]["name"] for n in (answer["Nodes"] or {}).get("items") or []])
    assert answers == [["k8s-node1"] if index % 2 == 0 else [] for index in range(CALLS)]
