"""Property-based fuzzing of the wire: recorded kube-scheduler bodies, mutated, against real servers.

Every mutation of a real request (wrong types at any path, nulls, huge numbers, deep nesting, keys that
differ only in case, repeated and unknown node names) must get 200, 400 or 413 (never a 5xx), and the
server must still answer /healthz afterwards. Both CEL engines, both modes. Bounded: a fixed number of
derandomized examples per verb and engine, so the suite stays fast and reproducible.

A second run grows list and map fields of the pod and the nodes to hundreds of elements, against rules
that iterate them with bodies that fail (issue #35: on celpy, such a comprehension doubled its memory per
element), on a `rulesched serve` process whose peak memory and answer times are asserted.
`RULESCHED_FUZZ_EXAMPLES` sets the number of examples of both runs (a long run: thousands).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.settings import Settings
from tests.builders import rule_set, write_rules
from tests.paths import RULES, SCHEDULER_FIXTURES
from tests.server import SpawnedServer, running_server, spawned_process

SEEDS = {
    "filter": ["basic/filter-0001.json", "nodecache/filter-0001.json"],
    "prioritize": ["basic/prioritize-0001.json", "nodecache/prioritize-0001.json"],
    "preempt": ["preempt/preempt-0001.json", "preempt-nodecache/preempt-0001.json"],
    "bind": [],
}
DEEP = "\x00deep\x00"
"""A placeholder replaced, once serialized, by JSON nested deeper than any parser's recursion limit."""
ANSWERED = {200, 400, 413}


def seed(path: str) -> Any:
    return json.loads((SCHEDULER_FIXTURES / path).read_text())


def bind_seed() -> dict[str, Any]:
    return {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "kind-worker"}


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a JSON document (the root included)."""
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*at, index))


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(document, dict):
        return {**document, head: replaced(document[head], rest, value)}
    copy = list(document)
    copy[head] = replaced(copy[head], rest, value)
    return copy


def at(document: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["", "kind-worker", "kind-worker2", "kind-control-plane", "no-such-node", DEEP]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, verb: str) -> bytes:
    """A seed of `verb`, changed one to three times, serialized (with deep nesting where asked): compact as
    kube-scheduler writes it (full mode's fast reading, `wire_full.read_sent`) or with spaces."""
    document = draw(st.sampled_from([seed(p) for p in SEEDS[verb]] or [bind_seed()]))
    for _ in range(draw(st.integers(1, 3))):
        targets = list(paths(document))
        path = draw(st.sampled_from(targets))
        target = at(document, path)
        how = draw(st.sampled_from(["value", "case", "repeat", "unknown-key", "drop"]))
        if how == "case" and isinstance(target, dict) and target:
            key = draw(st.sampled_from(sorted(target)))
            document = replaced(document, path, {**target, key.swapcase(): target[key]})
        elif how == "repeat" and isinstance(target, list) and target:
            document = replaced(document, path, [*target, draw(st.sampled_from(target))])
        elif how == "unknown-key" and isinstance(target, dict):
            document = replaced(document, path, {**target, draw(st.text(max_size=8)): draw(VALUES)})
        elif how == "drop" and isinstance(target, dict) and target:
            key = draw(st.sampled_from(sorted(target)))
            document = replaced(document, path, {k: v for k, v in target.items() if k != key})
        else:
            document = replaced(document, path, draw(VALUES))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    body = json.dumps(document, separators=separators).encode()  # the standard library writes integers of any size
    deep = b"[" * 5000 + b"]" * 5000
    return body.replace(json.dumps(DEEP).encode(), deep)


@pytest.fixture(scope="module")
def node_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nodes kube-scheduler sent in full mode, as the names-mode node source."""
    nodes: dict[str, Any] = {}
    for path in sorted(SCHEDULER_FIXTURES.glob("basic/filter-*.json")):
        for node in (json.loads(path.read_text()).get("Nodes") or {}).get("items") or []:
            nodes[node["metadata"]["name"]] = node
    file = tmp_path_factory.mktemp("fuzz") / "nodes.json"
    file.write_text(json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": list(nodes.values())}))
    return file


@pytest.fixture(scope="module", params=["cpp", "celpy"])
def client(request: pytest.FixtureRequest, node_file: Path) -> Iterator[httpx.Client]:
    config = Settings(
        rules_dir=RULES,
        nodes_file=node_file,
        cluster="off",
        cel_engine=request.param,
        max_body_bytes=1_000_000,
        max_candidates=50,
        enable_explain=True,
    )
    with running_server(config) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


FUZZ = settings(
    max_examples=int(os.environ.get("RULESCHED_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("verb", [*SEEDS, "explain"])
def test_mutated_scheduler_requests_get_no_5xx(client: httpx.Client, verb: str) -> None:
    @FUZZ
    @given(body=mutated("filter" if verb == "explain" else verb))
    def check(body: bytes) -> None:
        response = client.post(f"/{verb}", content=body, headers={"content-type": "application/json"})
        assert response.status_code in ANSWERED, (response.status_code, response.text[:300], body[:300])
        if response.status_code != 200:
            assert isinstance(response.json()["error"], str)

    check()
    assert client.get("/healthz").status_code == 200


ITERATED = [
    ("Pod", "spec", "tolerations"),
    ("Pod", "spec", "containers"),
    ("Pod", "metadata", "annotations"),
    ("Pod", "metadata", "labels"),
    ("Nodes", "items", 0, "metadata", "labels"),
    ("Nodes", "items", 0, "status", "images"),
]
"""The fields the iterating rules read (each grown where the document has it, or planted where it has not)."""
ITERATING_RULES = rule_set(
    "iterating",
    """
    filters:
    - name: tolerations
      expression: "pod.spec.tolerations.all(t, int(t.key) >= 0)"
    - name: annotations
      expression: "pod.metadata.annotations.all(k, int(pod.metadata.annotations[k]) >= 0)"
    - name: labels
      expression: "pod.metadata.labels.exists_one(k, int(pod.metadata.labels[k]) > 0)"
    - name: containers
      expression: "pod.spec.containers.map(c, c.name.size()).filter(n, n / 0 > 0).size() == 0"
    - name: node-labels
      expression: "node.metadata.labels.exists(k, k.size() > int(node.metadata.labels[k]))"
    - name: images
      expression: "node.status.images.all(i, i.names.all(n, int(n) > 0))"
    """,
)
GROW_DEADLINE = 2.0
"""The growing run's `--request-deadline` (seconds)."""
ANSWER_SLACK = 2.0
"""What an answer may take beyond the deadline on a loaded machine."""
GROWTH_LIMIT_MB = 100.0
"""Allowed growth of the server's peak memory over the whole growing run (each body is at most ~1 MB)."""


def planted(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """`document` with `value` at `path`, the maps on the way made where missing (a list index must exist)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(document, dict):
        return {**document, head: planted(document.get(head), rest, value)}
    if isinstance(document, list) and isinstance(head, int) and head < len(document):
        copy = list(document)
        copy[head] = planted(copy[head], rest, value)
        return copy
    return {head: planted(None, rest, value)} if isinstance(head, str) else document


@st.composite
def grown(draw: st.DrawFn) -> bytes:
    """A filter seed whose iterated fields (and one other list or map) hold hundreds of elements."""
    document = draw(st.sampled_from([seed(p) for p in SEEDS["filter"]]))
    others = [p for p in paths(document) if isinstance(at(document, p), (list, dict)) and p]
    iterated = draw(st.lists(st.sampled_from(ITERATED), min_size=1, max_size=3))
    for path in iterated + draw(st.lists(st.sampled_from(others), max_size=2)):
        size = draw(st.integers(100, 800))
        items = draw(st.lists(VALUES, min_size=1, max_size=5))
        if draw(st.booleans()):
            value: Any = [items[i % len(items)] for i in range(size)]
        else:
            value = {f"key-{i}": items[i % len(items)] for i in range(size)}
        document = planted(document, path, value)
    return json.dumps(document).encode().replace(json.dumps(DEEP).encode(), b'"deep"')


@pytest.fixture(scope="module", params=["cpp", "celpy"])
def iterating_server(
    request: pytest.FixtureRequest, node_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SpawnedServer]:
    directory = tmp_path_factory.mktemp(f"grow-{request.param}")
    write_rules(directory / "rules", ITERATING_RULES)
    options = ["--rules", str(directory / "rules"), "--nodes-file", str(node_file), "--cluster", "off"]
    options += ["--cel-engine", request.param, "--request-deadline", str(GROW_DEADLINE)]
    with spawned_process([*options, "--max-body-bytes", "4000000"], directory / "server.log") as process:
        yield process


def test_grown_lists_and_maps_against_iterating_rules_are_answered_in_time_in_bounded_memory(
    iterating_server: SpawnedServer,
) -> None:
    url = f"http://127.0.0.1:{iterating_server.port}"
    # A call slower than that fails at once (the defect made them take minutes, then the process died).
    with httpx.Client(base_url=url, timeout=GROW_DEADLINE + ANSWER_SLACK + 1) as client:
        client.post("/filter", content=json.dumps(seed(SEEDS["filter"][0])))  # every rule compiled, caches made
        before = iterating_server.peak_rss_mb()

        @FUZZ
        @given(body=grown())
        def check(body: bytes) -> None:
            started = time.monotonic()
            response = client.post("/filter", content=body, headers={"content-type": "application/json"})
            elapsed = time.monotonic() - started
            assert response.status_code in ANSWERED, (response.status_code, response.text[:300], body[:300])
            assert elapsed < GROW_DEADLINE + ANSWER_SLACK, (f"answered in {elapsed:.2f}s", body[:300])

        check()
        growth = iterating_server.peak_rss_mb() - before
        assert growth < GROWTH_LIMIT_MB, f"the server's peak memory grew by {growth:.0f} MB"
        assert client.get("/healthz").status_code == 200
