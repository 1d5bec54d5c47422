"""The shadow comparisons leave the cyclic garbage collector no work to do in a live answer: what the queued calls
hold is out of the collector's generations until the queue empties (`Held`).

Counts and states of the collector only, never durations.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.extender.answered import Answered, Idle
from rulesched.extender.metrics import Metrics
from rulesched.extender.shadow import Shadow
from rulesched.extender.shadow_collector import Held
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import make_engine
from rulesched.rules.context import NodeContext
from rulesched.rules.loader import load_rule_book
from rulesched.rules.store import RuleStore
from tests.builders import make_context, make_node, make_pod, make_usage
from tests.rulebooks import LIVE, SHADOW, rules_dir

NODES = 400
"""Candidates of a call."""


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection the collector runs while the test does (none held at the start)."""
    assert gc.get_freeze_count() == 0
    ran: list[int] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            ran.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        yield ran
    finally:
        gc.callbacks.remove(seen)
        gc.unfreeze()


def _books(tmp_path: Path) -> tuple[RuleBook, RuleStore]:
    live = load_rule_book([rules_dir(tmp_path / "live", LIVE)], make_engine("cpp"))
    store = RuleStore([rules_dir(tmp_path / "shadow", SHADOW)], make_engine("cpp"))
    assert store.reload() == "loaded"
    return live, store


def _nodes() -> list[NodeContext]:
    return [
        make_context(make_node(f"node-{i}", labels={"filter.xy.com": "true"}), make_usage(0.01 + i / 1000))
        for i in range(NODES)
    ]


def _answered(live: RuleBook, verb: Verb, pod: dict[str, Any], nodes: list[NodeContext]) -> Answered:
    now = datetime.datetime.now(datetime.UTC)
    decision = evaluate(prepared(live), Call(pod, nodes, verb, now))
    return Answered(verb.value, False, pod, nodes, {}, None, now, live, decision)


def _held(found: object) -> bool:
    """`found` is in none of the collector's generations (held out of them)."""
    return all(all(o is not found for o in gc.get_objects(generation)) for generation in range(3))


def test_queued_calls_are_out_of_the_collectors_generations_until_the_queue_empties(
    tmp_path: Path, collections: list[int]
) -> None:
    """Before, a burst queued behind the live answers made young collections again and again, each walking every
    waiting call's pod and candidate lists, in whatever call was being answered then."""
    live, store = _books(tmp_path)
    nodes = _nodes()
    idle = Idle()
    shadow = Shadow(store, idle, Metrics(), capacity=16, deadline=5.0, inline_work=1e9)
    pods = [make_pod(name=f"web-{i}", namespace="default") for i in range(4)]
    answered = [_answered(live, Verb.FILTER, pod, nodes) for pod in pods]

    async def scenario() -> None:
        idle.busy()  # a request is being read: the calls wait in the queue
        for one in answered:
            shadow.submit(one)
        assert shadow.waiting() == len(pods)
        assert gc.get_count()[0] < 50  # nothing made before the last call was queued counts for a collection
        assert gc.is_tracked(pods[0])
        assert _held(pods[0])
        assert _held(shadow.queue[0].call.nodes)
        idle.done()
        deadline = time.monotonic() + 10
        while shadow.waiting() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert shadow.waiting() == 0
        await asyncio.sleep(0.01)  # the step after the last slice finds the queue empty

    try:
        asyncio.run(scenario())
    finally:
        shadow.stop()
    assert gc.get_freeze_count() == 0  # the queue emptied: given back
    assert shadow.summary.as_dict()["comparisons"]["filter"]["dropped"] == 0


def test_past_its_bound_the_collector_gets_back_what_it_held(collections: list[int]) -> None:
    """A load that never lets the queue empty: after `bound` calls queued in a row the collector runs as usual
    (what it finds garbage is not held without limit), until the queue empties."""
    held = Held(2)
    held.hold(queued=True)
    held.hold(queued=False)  # a slice made: held again, not counted as a call
    held.hold(queued=True)
    assert gc.get_freeze_count() > 0
    held.hold(queued=True)
    assert gc.get_freeze_count() == 0
    made: list[list[int]] = [[] for _ in range(1000)]  # the collector runs again
    assert collections
    held.hold(queued=False)
    assert gc.get_freeze_count() == 0
    held.release()
    held.hold(queued=True)  # the queue emptied: held again
    assert gc.get_freeze_count() > 0
    held.release()
    assert gc.get_freeze_count() == 0
    del made
