"""The remembered pods of `--requeue` (bounded, timed, marked by changes), the token bucket and the change id."""

from __future__ import annotations

from typing import Any

from rulesched.controllers.requeue.memory import Change, RejectedPods, TokenBucket, rejected_key
from rulesched.writes.nudge import change_id
from tests.builders import make_pod


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pod(name: str) -> dict[str, Any]:
    found = make_pod(name=name, namespace="ns")
    found["metadata"]["uid"] = f"uid-{name}"
    return found


def test_the_set_keeps_at_most_its_bound_oldest_forgotten_first() -> None:
    pods = RejectedPods(kept=2, ttl=60, clock=Clock())
    for name in ("a", "b", "c"):
        pods.remember(pod(name), ["node-a"])
    assert [key for key, _ in pods.remembered()] == ["ns/b/uid-b", "ns/c/uid-c"]


def test_a_pod_remembered_again_is_one_entry_and_the_newest() -> None:
    pods = RejectedPods(kept=2, ttl=60, clock=Clock())
    pods.remember(pod("a"), ["node-a"])
    pods.remember(pod("b"), ["node-a"])
    pods.remember(pod("a"), ["node-b"])
    pods.remember(pod("c"), ["node-a"])
    assert [key for key, _ in pods.remembered()] == ["ns/a/uid-a", "ns/c/uid-c"]


def test_pods_are_forgotten_after_the_time_limit() -> None:
    clock = Clock()
    pods = RejectedPods(kept=10, ttl=60, clock=clock)
    pods.remember(pod("a"), ["node-a"])
    clock.now += 30
    pods.remember(pod("b"), ["node-a"])
    clock.now += 30
    assert pods.expire() == 1
    assert pods.size() == 1
    clock.now += 30
    assert pods.expire() == 1
    assert pods.size() == 0


def test_a_change_marks_only_the_candidates_it_concerns() -> None:
    pods = RejectedPods(kept=10, ttl=60, clock=Clock())
    pods.remember(pod("a"), ["node-a", "node-b", "node-c"])
    assert pods.take(10) == []  # nothing changed: nothing to evaluate
    pods.mark(Change("nodes", 1.0, frozenset({"node-c", "node-x"})))
    pods.mark(Change("pods", 2.0, frozenset({"node-a"})))
    [taken] = pods.take(10)
    assert taken.candidates() == ["node-a", "node-c"]
    assert taken.change is not None
    assert taken.change.kind == "nodes"  # the first change: the delay's start
    assert pods.take(10) == []  # handed over once
    pods.mark(Change("metrics", 3.0))
    [taken] = pods.take(10)
    assert taken.candidates() == ["node-a", "node-b", "node-c"]


def test_a_step_takes_at_most_its_batch_and_a_nudged_pod_waits() -> None:
    pods = RejectedPods(kept=10, ttl=60, clock=Clock())
    for name in ("a", "b", "c"):
        pods.remember(pod(name), ["node-a"])
    pods.mark(Change("rules", 1.0))
    assert [r.key for r in pods.take(2)] == ["ns/a/uid-a", "ns/b/uid-b"]
    assert pods.nudged("ns/a/uid-a")
    pods.mark(Change("metrics", 2.0))
    assert [r.key for r in pods.take(10)] == ["ns/b/uid-b", "ns/c/uid-c"]  # not a: it was nudged
    pods.retry("ns/a/uid-a")  # its nudge was refused: the next change may nudge it again
    pods.mark(Change("metrics", 3.0))
    assert [r.key for r in pods.take(10)] == ["ns/a/uid-a", "ns/b/uid-b", "ns/c/uid-c"]
    pods.forget(rejected_key(pod("a")))
    assert not pods.nudged("ns/a/uid-a")


def test_the_bucket_allows_a_burst_then_its_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    assert bucket.wait() == 0.5
    clock.now += 0.5
    assert bucket.take()
    assert not bucket.take()
    clock.now += 100
    assert sum(bucket.take() for _ in range(10)) == 3  # never more than the burst at once


def test_the_change_id_is_the_same_for_the_same_change_and_differs_otherwise() -> None:
    one = change_id("metrics", ["hash", "node-a", "208", 0.2, 1e9])
    assert one == change_id("metrics", ["hash", "node-a", "208", 0.2, 1e9])
    assert one != change_id("metrics", ["hash", "node-a", "209", 0.2, 1e9])
    assert one.startswith("metrics.")
    assert len(one.split(".")[1]) == 16
