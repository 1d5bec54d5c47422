"""Property-based fuzzing of the wire: recorded kube-scheduler bodies, mutated, against real servers.

Every mutation of a real request (wrong types at any path, nulls, huge numbers, deep nesting, keys that
differ only in case, repeated and unknown node names) must get 200, 400 or 413 (never a 5xx), and the
server must still answer /healthz afterwards. Both CEL engines, both modes. Bounded: a fixed number of
derandomized examples per verb and engine, so the suite stays fast and reproducible.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.settings import Settings
from tests.paths import RULES, SCHEDULER_FIXTURES
from tests.server import running_server

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
