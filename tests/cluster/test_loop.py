"""The shared background loop: pacing (backoff, jitter, free retry), status, state changes, stop."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, LoopStatus, Outcome
from tests.kubeapi import wait_for


class Script:
    """A step that plays a list of outcomes (an exception is raised), then "ok" forever; records each call."""

    def __init__(self, *plays: Outcome | Exception) -> None:
        self.plays = list(plays)
        self.calls = 0
        self.done = threading.Event()

    def __call__(self) -> Outcome:
        self.calls += 1
        if not self.plays:
            self.done.set()
            return "ok"
        play = self.plays.pop(0)
        if isinstance(play, Exception):
            raise play
        return play


@pytest.fixture
def changes() -> list[tuple[str, str]]:
    return []


def options(changes: list[tuple[str, str]], **extra: object) -> LoopOptions:
    def note(before: LoopStatus, after: LoopStatus) -> None:
        changes.append((before.state, after.state))

    values: dict[str, object] = {"backoff": Backoff(0.001, 0.004), "interval": 0.001, "on_change": note}
    return LoopOptions("test-loop", **(values | extra))  # type: ignore[arg-type]


@pytest.fixture
def running() -> Iterator[Callable[[BackgroundLoop], BackgroundLoop]]:
    loops: list[BackgroundLoop] = []

    def start(loop: BackgroundLoop) -> BackgroundLoop:
        loops.append(loop)
        loop.start()
        return loop

    yield start
    for loop in loops:
        loop.stop()


def test_backoff_doubles_up_to_the_cap() -> None:
    backoff = Backoff(0.2, 1.0)
    assert [backoff.delay(n) for n in range(1, 6)] == [0.2, 0.4, 0.8, 1.0, 1.0]


def test_jitter_only_shortens_a_pause_and_by_at_most_its_fraction() -> None:
    backoff = Backoff(1.0, 1.0, jitter=0.25)
    pauses = {backoff.pause(3) for _ in range(200)}
    assert all(0.75 <= p <= 1.0 for p in pauses)
    assert len(pauses) > 1, "no jitter"
    assert Backoff(1.0, 1.0, jitter=0).pause(3) == 1.0


def test_a_failure_is_recorded_described_and_announced_once_then_recovery(
    changes: list[tuple[str, str]], running: Callable[[BackgroundLoop], BackgroundLoop]
) -> None:
    step = Script(ValueError("boom"), ValueError("boom"), ValueError("again"))
    loop = BackgroundLoop(step, options(changes))
    assert loop.status() == LoopStatus("starting")
    running(loop)
    assert step.done.wait(5)
    wait_for(lambda: loop.status().state == "ok", what="the recovery")
    assert changes == [("starting", "failing"), ("failing", "ok")]
    status = loop.status()
    assert status.last_error == ""
    assert status.last_success is not None
    assert status.running


def test_a_failing_status_keeps_the_last_success_and_says_what_failed(changes: list[tuple[str, str]]) -> None:
    loop = BackgroundLoop(Script("ok", KeyError("gone")), options(changes))
    assert loop.run_once() == "ok"
    succeeded = loop.status().last_success
    assert loop.run_once() is None
    status = loop.status()
    assert (status.state, status.last_error, status.last_success) == ("failing", "KeyError: 'gone'", succeeded)


def test_describe_is_the_sources_own(changes: list[tuple[str, str]]) -> None:
    loop = BackgroundLoop(Script(ValueError("x")), options(changes, describe=lambda e: f"described {e}"))
    loop.run_once()
    assert loop.status().last_error == "described x"


def test_short_and_retry_are_not_failures(changes: list[tuple[str, str]]) -> None:
    loop = BackgroundLoop(Script("short", "retry"), options(changes))
    assert [loop.run_once(), loop.run_once()] == ["short", "retry"]
    assert loop.status().state == "starting"
    assert changes == []


def test_pauses_follow_the_outcomes() -> None:
    loop = BackgroundLoop(Script(), LoopOptions("x", interval=7.0, backoff=Backoff(1.0, 4.0, jitter=0)))
    pauses = [loop._pause(outcome) for outcome in ("retry", "retry", None, "short", None, "ok", "retry")]
    assert pauses == [0.0, 2.0, 4.0, 4.0, 4.0, 7.0, 0.0]


def test_stop_interrupts_the_step_and_ends_the_thread(changes: list[tuple[str, str]]) -> None:
    released = threading.Event()

    def blocked() -> Outcome:
        released.wait(10)
        return "ok"

    loop = BackgroundLoop(blocked, options(changes, interrupt=released.set, interval=60.0))
    loop.start()
    wait_for(lambda: loop.status().running, what="the thread")
    loop.stop()
    assert not loop.status().running
    assert loop.stopping


def test_a_failure_while_stopping_is_not_recorded(changes: list[tuple[str, str]]) -> None:
    loop = BackgroundLoop(Script(OSError("socket closed by stop()")), options(changes))
    loop.stop()
    assert loop.run_once() is None
    assert loop.status().state == "starting"
