"""Full mode read from the exact form kube-scheduler writes (`wire_full.read_sent`): every body is read as the
plain way reads it (the same request, or the same 400 and reason), a node sent again byte for byte is the
object decoded before, and the filter answer echoes the passing nodes as they were sent."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rulesched.extender import wire, wire_full
from rulesched.settings import Settings
from tests.extender.test_fuzz import FUZZ, mutated
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, RULES, SCHEDULER_FIXTURES, SCHEDULER_FIXTURES_NEWEST
from tests.server import running_server

LIMIT = 50
RECORDED = sorted(
    path
    for fixtures in (SCHEDULER_FIXTURES, SCHEDULER_FIXTURES_NEWEST)
    for path in fixtures.glob("*/*.json")
    if path.name.startswith(("filter-", "prioritize-")) and path.read_bytes().endswith(b'"NodeNames":null}')
)
"""Every full-mode filter and prioritize body a real kube-scheduler sent in the recordings."""


def read(body: bytes, texts: wire_full.NodeTexts | None) -> tuple[Any, ...]:
    """What a request reads as: its pod, nodes and names, or its error and reason."""
    try:
        args = wire.ExtenderArgs.parse(body, LIMIT, texts)
    except wire.WireError as error:
        return type(error).__name__, str(error)
    return args.pod, args.nodes, args.node_names, args.names


def sent_way(body: bytes, texts: wire_full.NodeTexts) -> bool:
    """Whether `body` is read from kube-scheduler's form (its nodes kept as texts)."""
    return wire.ExtenderArgs.parse(body, LIMIT, texts).texts is not None


def full_body(pod: bytes, texts: list[bytes]) -> bytes:
    """A full-mode body as kube-scheduler writes it, around node texts given as they are."""
    return b'{"Pod":' + pod + b',"Nodes":{"metadata":{},"items":[' + b",".join(texts) + b']},"NodeNames":null}'


def node_text(name: str, tail: bytes = b"") -> bytes:
    return b'{"metadata":{"name":"' + name.encode() + b'","resourceVersion":"7"},"status":{' + tail + b"}}"


POD = b'{"metadata":{"name":"web-1","namespace":"default"}}'


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_recorded_requests_are_read_as_the_plain_way_reads_them(path: Path) -> None:
    body, texts = path.read_bytes(), wire_full.NodeTexts()
    assert sent_way(body, texts)
    assert read(body, texts) == read(body, None)
    assert read(body, texts) == read(body, None)  # again, its nodes now known


def test_a_node_sent_again_unchanged_is_the_object_decoded_before() -> None:
    texts = wire_full.NodeTexts()
    first = wire.ExtenderArgs.parse(full_body(POD, [node_text("a"), node_text("b")]), LIMIT, texts)
    again = wire.ExtenderArgs.parse(full_body(POD, [node_text("b"), node_text("a")]), LIMIT, texts)
    assert first.nodes is not None
    assert again.nodes is not None
    assert [id(node) for node in again.nodes] == [id(first.nodes[1]), id(first.nodes[0])]


def test_a_node_changed_past_its_first_bytes_at_the_same_length_is_decoded_again() -> None:
    texts, padding = wire_full.NodeTexts(), b'"pad":"' + b"x" * 300 + b'",'
    before, after = node_text("a", padding + b'"v":"1.36.0"'), node_text("a", padding + b'"v":"1.36.1"')
    assert (len(before), before[:300]) == (len(after), after[:300])
    first = wire.ExtenderArgs.parse(full_body(POD, [before]), LIMIT, texts)
    changed = wire.ExtenderArgs.parse(full_body(POD, [after]), LIMIT, texts)
    assert first.nodes is not None
    assert changed.nodes is not None
    assert (first.nodes[0]["status"]["v"], changed.nodes[0]["status"]["v"]) == ("1.36.0", "1.36.1")
    assert len(texts) == 1  # the node's latest text only


def test_nodes_alike_in_their_length_and_first_bytes_are_told_apart() -> None:
    texts, stem = wire_full.NodeTexts(), "n" * 240  # the texts differ only past their first 256 bytes
    body = full_body(POD, [node_text(f"{stem}-a"), node_text(f"{stem}-b")])
    for _ in range(3):
        args = wire.ExtenderArgs.parse(body, LIMIT, texts)
        assert args.nodes is not None
        assert args.names == [n["metadata"]["name"] for n in args.nodes] == [f"{stem}-a", f"{stem}-b"]


def test_the_texts_kept_are_bounded() -> None:
    texts = wire_full.NodeTexts()
    body = full_body(POD, [node_text(f"n{index}") for index in range(wire_full._TEXTS_KEPT + 1)])
    assert read(body, texts)[0] == "TooManyError"  # read the sent way first, then over --max-candidates
    assert 0 < len(texts) <= wire_full._TEXTS_KEPT


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"pod":' + POD + b',"nodes":{"items":[' + node_text("a") + b']},"NodeNames":null}', id="case"),
        pytest.param(b'{"Pod":' + POD + b',"Nodes":{"items":[' + node_text("a") + b']},"NodeNames":null}\n', id="nl"),
        pytest.param(b'{"Pod":' + POD + b',"Nodes":{"Items":[' + node_text("a") + b']},"NodeNames":null}', id="key"),
        pytest.param(b'{"Pod":' + POD + b',"X":1,"Nodes":{"items":[]},"NodeNames":null}', id="unknown-key"),
        pytest.param(b'{"Pod":' + POD + b',"Nodes":{"items":[' + node_text("a") + b"]}}", id="no-node-names"),
    ],
)
def test_other_forms_are_read_the_plain_way(body: bytes) -> None:
    texts = wire_full.NodeTexts()
    assert read(body, texts) == read(body, None)
    assert len(texts) == 0


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ([b"1"], "Nodes.items[0] must be an object, not a number"),
        ([b'{"metadata":{}}'], "Nodes.items[0].metadata.name must be a non-empty string"),
        ([b'{"metadata":{"name":""}}'], "Nodes.items[0].metadata.name must be a non-empty string"),
        ([node_text("a"), b'{"metadata":{"name":5,"name":"b"}}', b"[]"], "Nodes.items[2] must be an object"),
        ([node_text("a", b'"x":1e400')], "request body is not valid JSON: number is infinity"),
        ([node_text("a", b'"x":"\xff"')], "request body is not valid JSON: str is not valid UTF-8"),
        ([node_text("a"), node_text("a")], "node 'a' is a candidate more than once"),
    ],
)
def test_bad_requests_get_the_plain_ways_reason(items: list[bytes], reason: str) -> None:
    texts, body = wire_full.NodeTexts(), full_body(POD, items)
    wire.ExtenderArgs.parse(full_body(POD, [node_text("a")]), LIMIT, texts)  # node a known already
    found = read(body, texts)
    assert found == read(body, None)
    assert found[1].startswith(reason)


@pytest.fixture(params=[None, 2500], ids=["default", "celpy"])
def recursion_limit(request: pytest.FixtureRequest) -> Iterator[None]:
    """The interpreter's recursion limit as it is, and as the celpy engine sets it (msgspec's nesting
    limit follows it; orjson's is its own)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(request.param or before)
    yield
    sys.setrecursionlimit(before)


@pytest.mark.usefixtures("recursion_limit")
@pytest.mark.parametrize("where", ["pod", "metadata", "node"])
def test_deep_nesting_is_read_as_the_plain_way_reads_it(where: str) -> None:
    for depth in range(1010, 1030):
        deep = b"[" * depth + b"]" * depth
        pod = b'{"metadata":{"name":"p"},"x":' + deep + b"}" if where == "pod" else POD
        texts = [node_text("a", b'"x":' + deep if where == "node" else b"")]
        body = full_body(pod, texts)
        if where == "metadata":
            body = body.replace(b'"metadata":{},"items"', b'"metadata":' + deep + b',"items"')
        assert outcome(body, wire_full.NodeTexts()) == outcome(body, None), depth


def outcome(body: bytes, texts: wire_full.NodeTexts | None) -> tuple[Any, ...]:
    """The error and reason, or the names read (values nested this deep are too deep to compare)."""
    found = read(body, texts)
    return found if isinstance(found[0], str) else ("read", found[3])


def test_a_good_node_then_sent_broken_gets_400() -> None:
    texts = wire_full.NodeTexts()
    wire.ExtenderArgs.parse(full_body(POD, [node_text("a", b'"x":1')]), LIMIT, texts)
    broken = full_body(POD, [node_text("a", b'"x":1e999')])
    assert read(broken, texts) == read(broken, None) == read(broken, None)
    assert read(broken, texts)[0] == "WireError"


def test_mutated_scheduler_requests_are_read_as_the_plain_way_reads_them() -> None:
    sent: list[bool] = []

    @FUZZ
    @given(body=mutated("filter"))
    def check(body: bytes) -> None:
        texts = wire_full.NodeTexts()
        for path in RECORDED[:2]:  # their nodes known, as after earlier calls
            wire.ExtenderArgs.parse(path.read_bytes(), LIMIT, texts)
        plain = read(body, None)
        assert read(body, texts) == plain
        assert read(body, wire_full.NodeTexts()) == plain
        if not isinstance(plain[0], str):  # read without error: which way?
            sent.append(sent_way(body, texts))

    check()
    assert set(sent) == {True, False}, "the mutations should be read both ways"


JSON_BYTES = [bytes([b]) for b in b'{}[],:"\\ \t\n\x0b\x0c\r0123456789.eE+-nultrfase\x00\x7f\xa0\xc3\xff']


@st.composite
def corrupted(draw: st.DrawFn) -> bytes:
    """A recorded full-mode body with one to three bytes replaced, inserted or deleted: byte-level damage
    anywhere, the structure around the nodes included."""
    body = draw(st.sampled_from(RECORDED[:4])).read_bytes()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(body) - 1))
        how = draw(st.sampled_from(["replace", "insert", "delete"]))
        byte = draw(st.sampled_from(JSON_BYTES))
        body = body[:at] + (b"" if how == "delete" else byte) + body[at + (how != "insert") :]
    return body


def test_corrupted_requests_are_read_as_the_plain_way_reads_them() -> None:
    @FUZZ
    @given(body=corrupted())
    def check(body: bytes) -> None:
        texts = wire_full.NodeTexts()
        for path in RECORDED[:4]:
            wire.ExtenderArgs.parse(path.read_bytes(), LIMIT, texts)
        assert read(body, texts) == read(body, None)

    check()


@pytest.fixture(scope="module")
def founding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    rules = tmp_path_factory.mktemp("rules")
    (rules / "xy-least-cpu.yaml").write_text((RULES / "xy-least-cpu.yaml").read_text())
    config = Settings(rules_dir=rules, nodes_file=EXAMPLE_NODES, metrics_file=EXAMPLE_METRICS, cluster="off")
    with running_server(config) as url, httpx.Client(base_url=url) as client:
        yield client


def example_texts() -> list[bytes]:
    """The classic three nodes, each with fields the plain way would write otherwise (`1E2`, `\\/`, `\\u00e9`)."""
    import yaml

    items = yaml.safe_load(EXAMPLE_NODES.read_text())["items"]
    classic = [n for n in items if n["metadata"]["name"] in ("k8s-master", "k8s-node1", "k8s-node2")]
    return [orjson.dumps(node)[:-1] + b',"extra":{"n":1E2,"s":"a\\/b\\u00e9"}}' for node in classic]


def test_the_filter_answer_echoes_each_passing_node_as_it_was_sent(founding: httpx.Client) -> None:
    texts = example_texts()
    for _ in range(2):  # the second time, the nodes are known
        response = founding.post("/filter", content=full_body(POD, texts))
        answer = response.json()
        assert answer["FailedAndUnresolvableNodes"] == {
            "k8s-master": "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"
        }
        assert answer["Nodes"] == {"metadata": {}, "items": [json.loads(text) for text in texts[1:]]}
        assert b'"items":[' + texts[1] + b"," + texts[2] + b"]" in response.content
