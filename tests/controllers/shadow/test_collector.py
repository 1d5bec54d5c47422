"""The shadow comparisons leave the cyclic garbage collector no work to do in a live answer: no young collection
falls due while calls wait for their comparison, and the one owed is paid once the queue empties (`Held`).

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

from rulesched.controllers.shadow import Shadow
from rulesched.controllers.shadow.collector import HELD_THRESHOLD, Held
from rulesched.controllers.shadow.metrics import ShadowMetrics
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
from tests.rulebooks import LIVE, SHADOW, rules_dir

NODES = 400
"""Candidates of a call."""


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection the collector runs while the test does."""
    ran: list[int] = []
    thresholds = gc.get_threshold()

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            ran.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        yield ran
    finally:
        gc.callbacks.remove(seen)
        gc.set_threshold(*thresholds)


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


def test_no_young_collection_falls_due_while_calls_wait_and_the_one_owed_is_paid_once_the_queue_empties(
    tmp_path: Path, collections: list[int]
) -> None:
    """Before, a burst queued behind the live answers made young collections again and again, each walking every
    waiting call's pod and candidate lists, in whatever call was being answered then."""
    live, store = _books(tmp_path)
    nodes = _nodes()
    idle = Idle()
    shadow = Shadow(store, idle, ShadowMetrics(), capacity=16, deadline=5.0, inline_work=1e9)
    answered = [_answered(live, Verb.FILTER, make_pod(name=f"web-{i}", namespace="default"), nodes) for i in range(4)]
    thresholds = gc.get_threshold()
    made: list[list[int]] = []

    async def scenario() -> None:
        idle.busy()  # a request is being read: the calls wait in the queue
        for one in answered:
            shadow.submit(one)
        assert shadow.waiting() == len(answered)
        collections.clear()
        made.extend([] for _ in range(5 * thresholds[0]))  # what the live answers make meanwhile, kept
        assert collections == []
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
    assert gc.get_threshold() == thresholds
    assert collections  # the collection owed, paid once the queue emptied
    assert gc.get_count()[0] < thresholds[0]
    assert shadow.summary.as_dict()["comparisons"]["filter"]["dropped"] == 0


def test_what_serve_froze_at_start_up_stays_frozen(collections: list[int]) -> None:
    """`serve` freezes what it built at start-up, so that full collections never scan it (`settle_garbage_
    collector`). Before, the queue emptying gave the collector back everything frozen, start-up included."""
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        held = Held(8)
        held.hold()
        held.release()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_past_its_bound_the_collector_runs_as_usual(collections: list[int]) -> None:
    """A load that never lets the queue empty: after `bound` calls queued in a row the collector runs as usual
    (what it finds garbage is not left without limit), until the queue empties."""
    thresholds = gc.get_threshold()
    held = Held(2)
    held.hold()
    held.hold()
    assert gc.get_threshold()[0] == HELD_THRESHOLD
    held.hold()
    assert gc.get_threshold() == thresholds
    made: list[list[int]] = [[] for _ in range(2 * thresholds[0])]  # the collector runs again
    assert collections
    held.release()
    held.hold()  # the queue emptied: held again
    assert gc.get_threshold()[0] == HELD_THRESHOLD
    held.release()
    assert gc.get_threshold() == thresholds
    del made
