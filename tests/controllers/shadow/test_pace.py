"""The shadow comparisons take the gaps between calls and never a call's own time: the connections say when a
request is being read or answered (`Idle`), the comparisons wait for the moments when none is, `Pace` lets one
start right after an answer only where it should end before the next call, and the queue keeps a call's live
outcome, not its live Decision (which holds the request's names).

Counts and states only, never durations: every wait is a bounded poll.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from rulesched.controllers.shadow import Shadow
from rulesched.controllers.shadow.metrics import ShadowMetrics
from rulesched.controllers.shadow.pace import (
    AFTER_ANSWER_SECONDS,
    CALM_MAX_SECONDS,
    CALM_SECONDS,
    SWITCH_SECONDS,
    Pace,
)
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.handoff.answered import Answered
from rulesched.handoff.idle import Idle
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import make_engine
from rulesched.rules.context import NodeContext
from rulesched.rules.loader import load_rule_book
from rulesched.rules.store import RuleStore
from tests.builders import make_context, make_node, make_pod, make_usage
from tests.controllers.shadow.test_shadow import settings
from tests.kubeapi import wait_for
from tests.rulebooks import CLASSIC, LIVE, SHADOW, names_args, pod, rules_dir
from tests.server import RunningServer, running


def _partial_request(server: RunningServer, body: bytes) -> socket.socket:
    """A connection that has sent a filter request's headers and not its body."""
    port = int(server.url.rsplit(":", 1)[1])
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = (
        f"POST /filter HTTP/1.1\r\nhost: rulesched\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    )
    connection.sendall(head.encode() + b"\r\n")
    return connection


def _answer(connection: socket.socket) -> bytes:
    """Read an HTTP answer's head and its content-length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head


def test_a_request_is_being_read_from_its_first_byte_to_the_last_byte_of_its_answer(tmp_path: Path) -> None:
    """Before, only a filter or prioritize call whose body had arrived counted, and only with a shadow book or a
    recording: a comparison could start while kube-scheduler's next call was arriving."""
    with running(settings(tmp_path)) as server:
        idle: Idle = server.parts.app.state.extender.idle
        body = orjson.dumps(names_args(pod("web-1"), CLASSIC))
        connection = _partial_request(server, body)
        wait_for(lambda: idle.active == 1, what="the request to count from its headers")
        connection.sendall(body)
        assert _answer(connection).startswith(b"HTTP/1.1 200")
        wait_for(lambda: idle.active == 0, what="the answered request to stop counting")
        lost = _partial_request(server, body)
        wait_for(lambda: idle.active == 1, what="the second request to count")
        lost.close()  # the client goes away before its body: the request counts no more
        wait_for(lambda: idle.active == 0, what="the lost connection to stop counting")
        connection.close()


def test_comparisons_wait_while_a_request_is_being_read(tmp_path: Path) -> None:
    """Calls answered on one connection while another request is half-read on a second: none of their
    comparisons is made until that request is answered; then all are, and its own."""
    options = settings(tmp_path, shadow_rules_dir=rules_dir(tmp_path / "shadow", SHADOW))
    with running(options) as server, httpx.Client(base_url=server.url) as client:
        body = orjson.dumps(names_args(pod("slow-1"), CLASSIC))
        waiting = _partial_request(server, body)
        idle: Idle = server.parts.app.state.extender.idle
        wait_for(lambda: idle.active == 1, what="the half-read request")
        pods = 5
        for index in range(pods):
            assert client.post("/filter", json=names_args(pod(f"web-{index}"), CLASSIC)).status_code == 200
        shadow = server.parts.app.state.extender.shadow
        assert shadow is not None
        held_until = time.monotonic() + 0.3
        while time.monotonic() < held_until:  # bounded: the comparisons stay queued while the request is read
            assert shadow.waiting() == pods
            time.sleep(0.02)
        waiting.sendall(body)
        assert _answer(waiting).startswith(b"HTTP/1.1 200")
        waiting.close()
        wait_for(lambda: shadow.waiting() == 0, what="the comparisons once no request is being read")
        summary = client.get("/shadow").json()
    assert summary["compared"] == {"calls": pods + 1, "compared": pods + 1, "dropped": 0}
    assert summary["made"] == {"betweenCalls": pods + 1, "thread": 0}


def _in_process(tmp_path: Path) -> tuple[RuleBook, Shadow, Idle]:
    """The live book, and a shadow (its book loaded) working on the event loop it is used on."""
    live_book = load_rule_book([rules_dir(tmp_path / "live", LIVE)], make_engine("cpp"))
    store = RuleStore([rules_dir(tmp_path / "shadow", SHADOW)], make_engine("cpp"))
    assert store.reload() == "loaded"
    idle = Idle()
    return live_book, Shadow(store, idle, ShadowMetrics(), capacity=8, deadline=5.0, inline_work=2000.0), idle


def _filter_answered(live_book: RuleBook, nodes: list[NodeContext]) -> Answered:
    """A filter call of pod web-1 over `nodes`, decided by the live book."""
    pod: dict[str, Any] = make_pod(name="web-1", namespace="default")
    now = datetime.datetime.now(datetime.UTC)
    decision = evaluate(prepared(live_book), Call(pod, nodes, Verb.FILTER, now))
    return Answered("filter", False, pod, nodes, {}, None, now, live_book, decision)


def _compared_all(shadow: Shadow, scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """`scenario` run on an event loop, the shadow stopped afterwards: every filter call it queued was compared."""
    try:
        asyncio.run(scenario())
    finally:
        shadow.stop()
    assert shadow.summary.as_dict()["comparisons"]["filter"]["dropped"] == 0


async def _drained(shadow: Shadow) -> None:
    """Once the queue is empty (bounded wait)."""
    deadline = time.monotonic() + 5
    while shadow.waiting() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def test_a_comparison_waits_for_a_request_to_be_answered_without_polling(tmp_path: Path) -> None:
    """Before, a slice that found a request being read tried again from a timer every half millisecond, which
    uvloop runs at once (its timers have a millisecond's resolution): the event loop spun while the request's
    body arrived, and kube-scheduler's prioritize call waited milliseconds for it. Now the slice is told when the
    request was answered, and no timer is set meanwhile."""
    live_book, shadow, idle = _in_process(tmp_path)
    nodes = [make_context(make_node("k8s-node1", labels={"filter.xy.com": "true"}), make_usage(0.1))]
    steps = 0
    step = shadow._step

    def counted() -> None:
        nonlocal steps
        steps += 1
        step()

    shadow._step = counted  # type: ignore[method-assign]  # counts the slices tried, and tries them

    async def scenario() -> None:
        shadow.submit(_filter_answered(live_book, nodes))
        idle.busy()  # a request began to be read before the slice's timer ran
        await asyncio.sleep(0.05)
        assert shadow.timer is None
        assert steps == 1
        assert shadow.waiting() == 1
        idle.done()  # answered: the slice is tried again
        await _drained(shadow)

    _compared_all(shadow, scenario)
    assert shadow.waiting() == 0


def came(gap: float, at: float = 100.0) -> Idle:
    """An `Idle` whose latest request came `gap` seconds after the answer before it, at `at`."""
    idle = Idle()
    idle.began, idle.gap, idle.last = at, gap, at + 0.001
    return idle


def test_a_comparison_starts_after_an_answer_only_where_it_should_end_before_the_next_call() -> None:
    pace = Pace()
    pace.answered("filter", came(1.0))  # the first call: what came before it says nothing
    pace.answered("prioritize", came(0.005))  # prioritize came 5 ms after filter's answer
    pace.answered("filter", came(0.002))  # the next filter 2 ms after prioritize's: now after a filter answer
    pace.took("compare filter", 1.0, 1.000_500)
    assert pace.fits("compare filter", AFTER_ANSWER_SECONDS)  # 0.5 ms within half (`FIT`) of the 5 ms gap
    assert not pace.fits("compare filter", 0.001)  # never so soon after the answer: kube-scheduler is reading it
    assert not pace.fits("compare filter", 0.002_100)  # not once 2.1 ms of the gap have gone
    assert pace.fits("warm", AFTER_ANSWER_SECONDS)  # a kind never seen is tried: its time is then known
    pace.answered("prioritize", came(0.005))  # now after a prioritize answer: the next filter within 2 ms
    assert not pace.fits("compare filter", AFTER_ANSWER_SECONDS)


def test_slices_that_do_not_fit_wait_until_the_next_call_is_overdue() -> None:
    """Before, slices ran as they came from 2 ms after an answer, whatever the gap expected: at 65 pods a second
    (13 ms after prioritize's answer) one begun at 12.9 ms held up the next filter. Now, within the gap
    expected, only those that fit; once the next call is later than that, as they come."""
    pace = Pace()
    pace.answered("filter", came(1.0))
    pace.answered("prioritize", came(0.001))
    pace.answered("filter", came(0.013))  # 13 ms after prioritize's answer
    pace.answered("prioritize", came(0.001))  # now after a prioritize answer: 13 ms expected
    pace.took("warm", 1.0, 1.000_500)
    assert pace.fits("warm", 0.003)
    assert not pace.fits("warm", 0.007)  # 0.5 ms is more than half of what is left
    assert not pace.overdue(0.007)
    assert pace.next_look(0.007) == pytest.approx(0.013)
    assert pace.overdue(0.013)
    assert pace.next_look(0.0005) == AFTER_ANSWER_SECONDS
    back_to_back = Pace()
    back_to_back.answered("filter", came(1.0))
    back_to_back.answered("prioritize", came(0.000_200))
    back_to_back.answered("filter", came(0.000_200))
    assert not back_to_back.overdue(CALM_SECONDS - 0.000_100)
    assert back_to_back.overdue(CALM_SECONDS)  # the burst is over: as they come


def test_the_gap_expected_follows_a_shorter_one_at_once_and_a_longer_one_slowly() -> None:
    pace = Pace()
    pace.answered("prioritize", came(1.0))
    for gap in (0.010, 0.001, 0.010):
        pace.answered("filter", came(gap))  # the gap after prioritize's answer
        pace.answered("prioritize", came(0.0))
    assert pace.gaps["prioritize"] == 0.001 + (0.010 - 0.001) / 8


def test_a_call_that_waited_for_a_slice_counts_the_gap_up_to_the_slice_only() -> None:
    """A call read right after a slice ended had arrived during it: its gap looks as long as the slice made it
    (before, the longer gap made more slices fit, each making the next gap look longer still)."""
    pace = Pace()
    pace.answered("filter", came(1.0))
    pace.took("decide filter", 10.000_100, 10.000_900)  # 0.1 ms after filter's answer at 10.0, for 0.8 ms
    pace.answered("prioritize", came(0.000_920, at=10.000_920))  # read 20 µs after the slice ended
    assert pace.gaps["filter"] == pytest.approx(0.000_100)
    pace.took("decide filter", 20.000_100, 20.000_300)
    pace.answered("filter", came(0.000_500, at=20.000_500))  # read 0.2 ms after the slice: it did not wait
    assert pace.gaps["prioritize"] == pytest.approx(0.000_500)


def test_each_call_that_waited_for_a_slice_makes_the_next_wait_longer_before_slices_run_as_they_come() -> None:
    """Back to back on a busy machine, the client often pauses for a core: each pause past the calm began slices as
    they came, and the call after it waited for the one under way. Each such call doubles the calm (up to
    `CALM_MAX_SECONDS`); once the queue is empty (`settled`), the next burst starts from `CALM_SECONDS`."""
    pace = Pace()
    pace.answered("filter", came(1.0))
    pace.answered("prioritize", came(0.000_200))  # back to back: 0.2 ms expected after filter's answer
    assert pace.overdue(CALM_SECONDS)
    pace.took("compare filter", 10.002, 10.002_700)  # overdue at 2 ms, for 0.7 ms
    pace.answered("filter", came(0.002_500, at=10.002_710))  # read 10 µs after it ended: it had waited
    assert (pace.overdue(CALM_SECONDS), pace.overdue(2 * CALM_SECONDS)) == (False, True)
    assert pace.next_look(AFTER_ANSWER_SECONDS) == 2 * CALM_SECONDS
    for started in (20.0, 30.0, 40.0, 50.0):  # more calls held up: never calmer than `CALM_MAX_SECONDS`
        pace.took("compare filter", started, started + 0.000_700)
        pace.answered("filter", came(0.000_800, at=started + 0.000_710))
    assert pace.calm == CALM_MAX_SECONDS
    assert pace.overdue(CALM_MAX_SECONDS)
    assert not pace.overdue(CALM_MAX_SECONDS - 0.000_100)
    pace.took("compare filter", 60.0, 60.000_700)
    pace.answered("filter", came(0.001, at=60.000_900))  # read 0.2 ms after the slice ended: it did not wait
    assert pace.calm == CALM_MAX_SECONDS  # only an empty queue ends the burst
    pace.settled()
    assert pace.overdue(CALM_SECONDS)


def test_the_burst_after_an_emptied_queue_starts_calm_again(tmp_path: Path) -> None:
    """The shadow tells its `Pace` when the queue empties, as it tells the collector (`Held`)."""
    live_book, shadow, _idle = _in_process(tmp_path)
    nodes = [make_context(make_node("k8s-node1", labels={"filter.xy.com": "true"}), make_usage(0.1))]
    shadow.pace.took("compare filter", 10.0, 10.000_700)
    shadow.pace.answered("filter", came(0.000_800, at=10.000_710))  # a call held up by a slice
    assert shadow.pace.calm == 2 * CALM_SECONDS

    async def scenario() -> None:
        shadow.submit(_filter_answered(live_book, nodes))
        await _drained(shadow)

    _compared_all(shadow, scenario)
    assert shadow.pace.calm == CALM_SECONDS


def test_one_long_slice_does_not_make_its_kind_look_long() -> None:
    """A slice the collector or a cold cache made 50 times as long counts as twice as long, once."""
    pace = Pace()
    pace.took("compare prioritize", 1.0, 1.000_200)
    pace.took("compare prioritize", 2.0, 2.010)
    assert pace.times["compare prioritize"] == pytest.approx(0.000_200 + (0.000_400 - 0.000_200) / 4)


def test_the_queue_keeps_the_live_outcome_not_the_live_decision(tmp_path: Path) -> None:
    """A queued call holds its pod, node contexts and the live decision's outcome: the Decision (and the
    request's names it holds) is freed while the call waits, and the comparison made later is the same."""
    live_book, shadow, idle = _in_process(tmp_path)
    nodes = [
        make_context(make_node(name, labels={"filter.xy.com": "true"} if name != "k8s-master" else {}), make_usage(cpu))
        for name, cpu in (("k8s-master", 0.2), ("k8s-node1", 0.087), ("k8s-node2", 0.067))
    ]

    async def scenario() -> None:
        answered = _filter_answered(live_book, nodes)
        decision = answered.decision
        references = sys.getrefcount(decision)
        idle.busy()  # a request is being read: the call waits in the queue
        shadow.submit(answered)
        gc.collect()
        assert shadow.waiting() == 1
        assert sys.getrefcount(decision) == references  # nothing queued refers to it
        idle.done()
        await _drained(shadow)

    try:
        asyncio.run(scenario())
    finally:
        shadow.stop()
    summary = shadow.summary.as_dict()
    assert summary["comparisons"]["filter"] == {"same": 0, "differs": 1, "dropped": 0}
    assert summary["examples"][0]["nodes"] == ["k8s-node1"]


PER_POD_FILTER = """\
  - name: not-named-after-its-node
    expression: pod.metadata.name != node.metadata.name
"""


def test_the_shadow_thread_hands_the_interpreter_lock_over_within_half_a_millisecond(tmp_path: Path) -> None:
    """A call too large for the event loop is decided in the shadow thread, which holds the interpreter lock
    meanwhile: a live call that arrived then waited for Python's switch interval, 5 ms. While the thread
    evaluates the interval is `SWITCH_SECONDS`, and it is set back after."""
    live_book = load_rule_book([rules_dir(tmp_path / "live", LIVE)], make_engine("cpp"))
    per_pod = SHADOW.replace("  scores:\n", PER_POD_FILTER + "  scores:\n")  # made for each pod on each node
    store = RuleStore([rules_dir(tmp_path / "shadow", per_pod)], make_engine("cpp"))
    assert store.reload() == "loaded"
    idle = Idle()
    shadow = Shadow(store, idle, ShadowMetrics(), capacity=8, deadline=5.0, inline_work=0.0)  # every call too large
    nodes = [
        make_context(make_node(f"node-{i}", labels={"filter.xy.com": "true"}), make_usage(i / 3000))
        for i in range(3000)
    ]
    before = sys.getswitchinterval()
    seen: set[float] = set()

    async def scenario() -> None:
        shadow.submit(_filter_answered(live_book, nodes))
        deadline = time.monotonic() + 20
        while shadow.waiting() and time.monotonic() < deadline:
            seen.add(sys.getswitchinterval())
            await asyncio.sleep(0.0002)

    try:
        asyncio.run(scenario())
    finally:
        shadow.stop()
    assert shadow.status()["made"] == {"betweenCalls": 0, "thread": 1}
    assert SWITCH_SECONDS in seen
    assert sys.getswitchinterval() == before


def test_a_large_shadow_decision_is_made_on_the_event_loop_once_its_nodes_had_their_results(tmp_path: Path) -> None:
    """A new pod's shadow decision over 1000 nodes, its per-pod score not run yet on any: too large for the
    event loop. Before, once its nodes had their memos it still was, and went to the shadow thread (which holds
    the interpreter lock against the calls arriving meanwhile); now each slice also decides the call over its
    `WARM_NODES`, the caches keep those results, and the whole decision then fits."""
    live_book = load_rule_book([rules_dir(tmp_path / "live", LIVE)], make_engine("cpp"))
    pod_scored = SHADOW.replace(
        "expression: variables.cpuUsed", "expression: variables.cpuUsed * double(size(pod.metadata.name))"
    )
    store = RuleStore([rules_dir(tmp_path / "shadow", pod_scored)], make_engine("cpp"))
    assert store.reload() == "loaded"
    idle = Idle()
    shadow = Shadow(store, idle, ShadowMetrics(), capacity=8, deadline=5.0, inline_work=2000.0)
    nodes = [
        make_context(make_node(f"node-{i}", labels={"filter.xy.com": "true"}), make_usage(i / 1000))
        for i in range(1000)
    ]
    pod: dict[str, Any] = make_pod(name="web-1", namespace="default")
    now = datetime.datetime.now(datetime.UTC)
    decision = evaluate(prepared(live_book), Call(pod, nodes, Verb.PRIORITIZE, now))

    async def scenario() -> None:
        shadow.submit(Answered("prioritize", False, pod, nodes, {}, None, now, live_book, decision))
        await _drained(shadow)

    try:
        asyncio.run(scenario())
    finally:
        shadow.stop()
    assert shadow.status()["made"] == {"betweenCalls": 1, "thread": 0}
    assert shadow.summary.as_dict()["comparisons"]["prioritize"] == {"same": 0, "differs": 1, "dropped": 0}
