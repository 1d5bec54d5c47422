"""Bounded work per request over a real server: repeated names, candidate caps, slow bodies, any 1 MB shape.

Issue #12. Every answer is a 200, 400, 408 or 413 with a JSON reason, and /healthz keeps answering.
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.cluster.nodes.nodecache import NodeCache
from rulesched.settings import Settings
from tests.kubeapi import KubeAPI, wait_for
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, EXAMPLES, RULES
from tests.server import running, running_server

POD = json.loads((EXAMPLES / "pod.json").read_text())
NODES = ["k8s-master", "k8s-node1", "k8s-node2"]
MEGABYTE = 1_000_000


def config(**overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "rules_dir": RULES,
        "nodes_file": EXAMPLE_NODES,
        "metrics_file": EXAMPLE_METRICS,
        "cluster": "off",
        "max_body_bytes": 2 * MEGABYTE,
        "max_candidates": 1000,
        "body_timeout": 0.5,
    }
    return Settings(**(base | overrides))


@pytest.fixture(scope="module", params=["cpp", "celpy"])
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    with running_server(config(cel_engine=request.param)) as url:
        yield url


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as client:
        yield client


def names(candidates: list[str], pod: dict[str, Any] = POD) -> dict[str, Any]:
    return {"Pod": pod, "Nodes": None, "NodeNames": candidates}


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"filter.xy.com": "yes"}}}


def full(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Pod": POD, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    reason = response.json()["error"]
    assert isinstance(reason, str)
    return reason


@pytest.mark.parametrize("verb", ["filter", "prioritize", "explain"])
def test_a_repeated_candidate_is_a_400(client: httpx.Client, verb: str) -> None:
    response = client.post(f"/{verb}", json=names(["k8s-node1", "k8s-node2", "k8s-node1"]))
    if verb == "explain":
        assert response.status_code == 404  # disabled here; the parse is the same as filter's
        return
    assert "'k8s-node1' is a candidate more than once" in error(response, 400)


def test_a_repeated_node_in_full_mode_is_a_400(client: httpx.Client) -> None:
    response = client.post("/filter", json=full([node("a"), node("b"), node("a")]))
    assert "'a' is a candidate more than once" in error(response, 400)


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_more_candidates_than_the_cap_is_a_413(client: httpx.Client, verb: str) -> None:
    response = client.post(f"/{verb}", json=names([f"node-{i}" for i in range(1001)]))
    assert "1001 candidate nodes, more than 1000 (--max-candidates)" in error(response, 413)
    assert client.post(f"/{verb}", json=names([f"node-{i}" for i in range(1000)])).status_code == 200


def test_preempt_with_victims_on_more_nodes_than_the_cap_is_a_413(client: httpx.Client) -> None:
    victims = {f"node-{i}": {"Pods": [], "NumPDBViolations": 0} for i in range(1001)}
    response = client.post("/preempt", json={"Pod": POD, "NodeNameToMetaVictims": victims})
    assert "more than 1000" in error(response, 413)


@pytest.mark.parametrize(("first", "second"), [("NodeNames", "nodenames"), ("Pod", "pod")])
def test_keys_that_differ_only_in_case_are_a_400(client: httpx.Client, first: str, second: str) -> None:
    body = names(NODES) | {first: names(NODES)[first], second: names(["k8s-node1"])[first]}
    reason = error(client.post("/filter", json=body), 400)
    assert f"keys that differ only in case: {first!r} and {second!r}" in reason


def test_node_list_keys_are_read_as_go_reads_them(client: httpx.Client) -> None:
    # Go decodes `Items` into NodeList.Items as it does `items`; both at once would overwrite each other.
    body = full([node("k8s-node1")]) | {"Nodes": {"Items": [node("k8s-node1")]}}
    assert client.post("/filter", json=body).json()["Nodes"]["items"][0]["metadata"]["name"] == "k8s-node1"
    both = full([node("k8s-node1")]) | {"Nodes": {"items": [node("k8s-node1")], "Items": [node("k8s-node2")]}}
    assert "Nodes has keys that differ only in case" in error(client.post("/filter", json=both), 400)


def test_victim_keys_that_differ_only_in_case_are_a_400(client: httpx.Client) -> None:
    victims = {"k8s-node1": {"Pods": [], "pods": [{"UID": "u"}], "NumPDBViolations": 0}}
    response = client.post("/preempt", json={"Pod": POD, "NodeNameToMetaVictims": victims})
    assert "differ only in case" in error(response, 400)


@pytest.mark.parametrize("metadata", [[], "x", 3, True])
def test_preempt_with_a_victim_whose_metadata_is_not_an_object_is_a_400(client: httpx.Client, metadata: Any) -> None:
    victims = {"k8s-node1": {"Pods": [{"metadata": metadata}], "NumPDBViolations": 0}}
    response = client.post("/preempt", json={"Pod": POD, "NodeNameToVictims": victims})
    assert "metadata must be an object" in error(response, 400)


def one_megabyte_bodies() -> dict[str, bytes]:
    """Requests of about 1 MB in the shapes that used to buy seconds of work or a 500."""
    repeated = json.dumps(names(["k8s-node1"] * (MEGABYTE // 12))).encode()
    unknown = json.dumps(names([f"n{i}" for i in range(MEGABYTE // 10)])).encode()
    deep = b'{"Pod": ' + b"[" * (MEGABYTE // 2) + b"]" * (MEGABYTE // 2) + b', "NodeNames": []}'
    wide_pod = json.dumps(names(NODES, {**POD, "extra": ["x" * 10] * (MEGABYTE // 14)})).encode()
    same_node = json.dumps(full([node("a")] * (MEGABYTE // 60))).encode()
    return {"repeated": repeated, "unknown": unknown, "deep": deep, "wide-pod": wide_pod, "same-node": same_node}


@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt"])
@pytest.mark.parametrize("shape", sorted(one_megabyte_bodies()))
def test_one_megabyte_of_any_shape_is_answered_well_under_a_second_without_a_5xx(
    client: httpx.Client, verb: str, shape: str
) -> None:
    body = one_megabyte_bodies()[shape]
    assert len(body) >= MEGABYTE * 0.9
    answers = [client.post(f"/{verb}", content=body, headers={"content-type": "application/json"}) for _ in range(2)]
    assert all(a.status_code in {200, 400, 413} for a in answers), answers[0].text[:300]
    # Tens of milliseconds measured (limits.md); the better of two tries, under a second, leaves room for
    # a loaded test machine (the server shares this process). Before, the repeated name took 7 s.
    assert min(a.elapsed.total_seconds() for a in answers) < 1.0
    assert client.get("/healthz").status_code == 200


def raw_connection(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_a_body_that_stops_arriving_is_dropped_and_the_server_keeps_answering(
    client: httpx.Client, server: str
) -> None:
    with raw_connection(server) as stalled:
        head = b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        stalled.sendall(head + b'{"Pod": ')
        assert client.get("/healthz").status_code == 200  # while the body is missing
        answer = b""
        while chunk := stalled.recv(65536):  # the server answers, then closes: recv ends with b""
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:100]
    assert b"--body-timeout" in answer
    assert client.get("/healthz").status_code == 200


def answer_and_close(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    answer = b""
    while chunk := connection.recv(65536):
        answer += chunk
    return answer


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /filter HTTP/1.1\r\nHost: x\r\n", b"GET /healthz HTTP/1.1\r\n\r\n"],
    ids=["nothing", "part of the headers", "then part of the next request"],
)
def test_headers_that_stop_arriving_are_answered_408_and_the_connection_closed(
    client: httpx.Client, server: str, sent: bytes
) -> None:
    # uvicorn times out only idle keep-alive connections: before, these stayed open as long as the client
    # liked, each holding a file descriptor ("slow loris"). Now the headers have --body-timeout too.
    with raw_connection(server) as stalled:
        stalled.sendall(sent)
        if sent.startswith(b"GET"):
            assert stalled.recv(65536).startswith(b"HTTP/1.1 200 ")  # a whole request is answered
            stalled.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")  # and the next one stops midway
        assert client.get("/healthz").status_code == 200
        answer = answer_and_close(stalled)  # recv ends with b"" once the server closes
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:100]
    assert b"request headers did not arrive within 0.5 s (--body-timeout)" in answer
    assert client.get("/healthz").status_code == 200


def trickle_headers(connection: socket.socket, lines: int) -> int:
    """Send a header line every 50 ms until the server closes the connection; how many were sent."""
    for number in range(lines):
        try:
            connection.sendall(f"X-Header-{number}: y\r\n".encode())
        except OSError:  # closed by the server
            return number
        time.sleep(0.05)
    return lines


def test_a_client_that_keeps_sending_headers_slowly_is_cut_off(server: str) -> None:
    with raw_connection(server) as trickle:
        trickle.sendall(b"POST /filter HTTP/1.1\r\n")
        assert trickle_headers(trickle, 100) < 60  # the whole would take 5 s; the timeout is 0.5 s


def test_slow_clients_cannot_keep_others_out_for_longer_than_the_timeout() -> None:
    # 40 stalled connections where only 30 are allowed: the scheduler gets 503s at first, then, once the
    # stalled ones are closed at --body-timeout, answers again.
    with running_server(config(max_connections=30, body_timeout=0.5)) as url:
        stalled = [raw_connection(url) for _ in range(40)]
        try:
            for number, each in enumerate(stalled):
                each.sendall(b"POST /filter HTTP/1.1\r\n" if number % 2 else b"")
            with httpx.Client(base_url=url, timeout=5) as client:
                wait_for(lambda: client.get("/healthz").status_code == 200, timeout=5, what="answers again")
        finally:
            for each in stalled:
                each.close()


def test_connections_beyond_the_limit_get_a_503_and_the_server_recovers() -> None:
    with running_server(config(max_connections=3)) as url:
        idle = [raw_connection(url) for _ in range(3)]
        try:
            with raw_connection(url) as extra:
                extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert extra.recv(65536).startswith(b"HTTP/1.1 503 ")
        finally:
            for each in idle:
                each.close()
        with httpx.Client(base_url=url) as client:
            wait_for(lambda: client.get("/healthz").status_code == 200, what="the server to accept again")


def test_unknown_names_beyond_the_fetch_limit_are_not_looked_up(api: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    settings = config(nodes_file=None, kubeconfig=kubeconfig, cluster="on", max_node_fetches=2, metrics_interval=5)
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=30) as client:
        wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz")
        unknown = [f"node-new-{i}" for i in range(6)]
        answer = client.post("/filter", json=names(["node-a", *unknown])).json()
    assert set(answer["FailedAndUnresolvableNodes"]) == set(unknown)
    asked = api.requests("GET /api/v1/nodes/node-new-")
    assert len(asked) == 2, asked
    not_asked = [answer["FailedAndUnresolvableNodes"][name] for name in unknown[2:]]
    assert all("not looked up: more than 2 unknown names" in reason for reason in not_asked)


def test_during_an_api_outage_requests_naming_new_nodes_make_almost_no_gets(api: KubeAPI, tmp_path: Path) -> None:
    # Issue #12 measured 74 direct GETs in 15 s at 5 requests/s, one per request naming a node the cache
    # lacked. Now the failed GET pauses every lookup for the node cache's backoff (and misses are kept).
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    settings = config(nodes_file=None, kubeconfig=kubeconfig, cluster="on", metrics_interval=5)
    with running(settings) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz")
        nodes = server.parts.cluster.nodes
        assert isinstance(nodes, NodeCache)
        api.go_down()
        wait_for(lambda: nodes.status().failing, what="the node cache to notice the outage")
        before = len(api.requests("GET /api/v1/nodes/"))
        for number in range(15):  # 5 requests a second for 3 s, each naming a node never seen
            answer = client.post("/filter", json=names(["node-a", f"node-new-{number}"])).json()
            assert f"node-new-{number}" in answer["FailedAndUnresolvableNodes"]
            time.sleep(0.2)
        asked = len(api.requests("GET /api/v1/nodes/")) - before
    assert asked <= 2, f"{asked} direct GETs in 3 s of outage"


def test_a_body_above_the_limit_without_a_length_is_a_413_however_it_arrives() -> None:
    # Chunked, so there is no content-length to refuse it by: it is counted as it is read, whether it came
    # whole with its headers (then read at once, without a timer) or after them.
    body = b"{" + b" " * 3000 + b"}"
    head = b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked = b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
    with running_server(config(max_body_bytes=1000)) as server:
        for parts in ([head + chunked], [head, chunked]):
            with raw_connection(server) as connection:
                for part in parts:
                    connection.sendall(part)
                    time.sleep(0.05)  # the second part arrives once the request is being answered
                answer = answer_and_close(connection)
            assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
            assert b"--max-body-bytes" in answer


def test_health_checks_are_answered_while_a_large_request_is_worked_out() -> None:
    # 19,999 distinct nodes in full mode (about 0.7 MB): seconds of work on a small machine. It runs in a
    # worker thread (--thread-candidates), so the event loop answers /healthz meanwhile; before, nothing
    # was answered until it was done.
    nodes = [{"metadata": {"name": f"tiny-{i}"}} for i in range(19_999)]
    body = json.dumps(full(nodes) | {"Pod": POD}).encode()
    answered_meanwhile = 0
    with (
        running_server(config(max_candidates=20_000)) as server,
        httpx.Client(base_url=server, timeout=60) as large,
        httpx.Client(base_url=server, timeout=60) as small,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        pending = pool.submit(large.post, "/filter", content=body, headers={"content-type": "application/json"})
        while not pending.done() and answered_meanwhile < 200:
            assert small.get("/healthz").status_code == 200
            answered_meanwhile += not pending.done()
        assert pending.result().status_code == 200, pending.result().text[:200]
    # While the body arrives, the loop answers between its chunks (about ten times); after that, only
    # a loop that is not stalled answers (hundreds of times on the test machine, against 9 before).
    assert answered_meanwhile >= 50


def test_a_client_that_goes_away_mid_body_is_no_internal_error(client: httpx.Client, server: str) -> None:
    def internal_errors() -> float:
        text = client.get("/metrics").text
        found = [line for line in text.splitlines() if line.startswith("rulesched_requests_total") and '"500"' in line]
        return sum(float(line.rsplit(" ", 1)[1]) for line in found)

    before = internal_errors()
    with raw_connection(server) as leaving:
        head = b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        leaving.sendall(head + b'{"Pod": ')
        time.sleep(0.2)  # the body's first part read, the rest awaited
    wait_for(lambda: 'code="400",verb="filter"' in client.get("/metrics").text, what="the call counted")
    assert internal_errors() == before, "a client that went away was answered as an internal error"
    assert client.get("/healthz").status_code == 200
