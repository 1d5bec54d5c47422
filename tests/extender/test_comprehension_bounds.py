"""A comprehension over a large list or map whose body errors: answered in time, in flat memory (issue #35).

On the celpy engine, `all()` over a pod's annotations whose body errored (`int(value)` of a non-number)
doubled its error message with every element: 24 annotations took 512 MB, a string receiver grew to
23.8 GB and the kernel killed the server. Each case here is a names-mode `/filter` to a real `rulesched
serve` process on both engines, with the process's peak memory (VmHWM) read before and after.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rulesched.rules.cel.library import NOT_ITERABLE
from tests.builders import make_node, rule_set, write_rules
from tests.server import SpawnedServer, spawned_process

DEADLINE = 2.0
"""The server's `--request-deadline` (seconds)."""
ANSWER_SLACK = 1.5
"""What an answer may take beyond the deadline on a loaded machine (the event loop, the HTTP round trip)."""
GROWTH_LIMIT_MB = 25.0
"""Allowed growth of the server's peak memory over one call; before the fix, 24 annotations grew it by 430 MB."""
ELEMENTS = 10_000

ITERATING_RULES = rule_set(
    "iterating",
    """
    filters:
    - name: numeric-annotations
      expression: >-
        !has(pod.metadata.annotations) || pod.metadata.annotations.all(k, int(pod.metadata.annotations[k]) >= 0)
    - name: numeric-tolerations
      expression: "!has(pod.spec.tolerations) || pod.spec.tolerations.all(t, int(t.key) >= 0)"
    - name: any-numeric-label
      expression: "!has(pod.metadata.labels) || pod.metadata.labels.exists(k, int(pod.metadata.labels[k]) < 0)"
    """,
)


@pytest.fixture(scope="module", params=["cpp", "celpy"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpawnedServer]:
    directory = tmp_path_factory.mktemp(f"bounds-{request.param}")
    write_rules(directory / "rules", ITERATING_RULES)
    nodes = directory / "nodes.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": [make_node("node-a")]}))
    options = ["--rules", str(directory / "rules"), "--nodes-file", str(nodes), "--cluster", "off"]
    options += ["--cel-engine", request.param, "--request-deadline", str(DEADLINE), "--enable-explain"]
    with spawned_process(options, directory / "server.log") as process:
        filtered(process, {"metadata": {"name": "warm-up", "namespace": "default"}})  # every rule compiled, caches made
        yield process


def reasons(answer: dict[str, Any]) -> dict[str, str]:
    """Why each node was rejected, whichever list it is in."""
    return {**(answer.get("FailedNodes") or {}), **(answer.get("FailedAndUnresolvableNodes") or {})}


def filtered(server: SpawnedServer, pod: dict[str, Any]) -> tuple[dict[str, Any], float, float]:
    """A names-mode `/filter` of `pod` over node-a: the answer, its time in seconds and the growth of the
    server's peak memory in MB."""
    before = server.peak_rss_mb()
    body = {"Pod": {"apiVersion": "v1", "kind": "Pod", **pod}, "NodeNames": ["node-a"]}
    started = time.monotonic()
    response = httpx.post(f"http://127.0.0.1:{server.port}/filter", json=body, timeout=30)
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text[:300]
    return response.json(), elapsed, server.peak_rss_mb() - before


def pod(annotations: int = 0, tolerations: int = 0, labels: int = 0) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web-1", "namespace": "default"}
    if annotations:
        metadata["annotations"] = {f"example.com/key-{i}": f"value-{i}" for i in range(annotations)}
    if labels:
        metadata["labels"] = {f"key-{i}": f"value-{i}" for i in range(labels)}
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if tolerations:
        spec["tolerations"] = [{"key": f"key-{i}", "operator": "Exists"} for i in range(tolerations)]
    return {"metadata": metadata, "spec": spec}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(pod(annotations=24), id="24-annotations"),
        pytest.param(pod(annotations=ELEMENTS), id="map-of-10000"),
        pytest.param(pod(tolerations=ELEMENTS), id="list-of-10000"),
        pytest.param(pod(labels=ELEMENTS), id="exists-over-10000"),
    ],
)
def test_an_erroring_body_over_many_elements_is_answered_in_time_in_flat_memory(
    server: SpawnedServer, case: dict[str, Any]
) -> None:
    answer, elapsed, growth = filtered(server, case)
    assert answer["NodeNames"] == [], answer  # the rule's error rejects the node (failurePolicy: Fail)
    assert "node-a" in reasons(answer)
    assert elapsed < DEADLINE + ANSWER_SLACK, f"answered in {elapsed:.2f}s"
    assert growth < GROWTH_LIMIT_MB, f"the server's peak memory grew by {growth:.0f} MB"


def test_a_string_where_a_list_is_iterated_is_an_error_at_once(server: SpawnedServer) -> None:
    # The fuzzed body: celpy iterated the string character by character (and grew to 23.8 GB).
    fuzzed = {"spec": {"tolerations": "x" * 100_000}}
    answer, elapsed, growth = filtered(server, fuzzed)
    assert answer["NodeNames"] == [], answer
    assert elapsed < 1.0, f"answered in {elapsed:.2f}s"
    assert growth < GROWTH_LIMIT_MB, f"the server's peak memory grew by {growth:.0f} MB"
    body = {"Pod": {"apiVersion": "v1", "kind": "Pod", **fuzzed}, "NodeNames": ["node-a"]}
    explained = httpx.post(f"http://127.0.0.1:{server.port}/explain", json=body, timeout=30).text
    assert NOT_ITERABLE in explained


def test_the_server_answers_the_next_call_after_the_large_ones(server: SpawnedServer) -> None:
    answer, _, _ = filtered(server, pod(annotations=3))
    assert "node-a" in reasons(answer)  # the annotations are not numbers
    response = httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=10)
    assert response.status_code == 200
