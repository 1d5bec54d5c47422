"""Memory stays bounded whatever the traffic (issue #12): new workloads do not grow the process.

cel-expr-python's `Activation` keeps memory for every distinct program evaluated against it, and a node's
kept bindings live as long as its context. With a pod-dependent rule over more zones than `_FEW_GROUPS`,
each new pod key brings a new program bound to the pod, evaluated against every kept activation: before
the cpp engine renewed them, 200 nodes grew by about 20 MB per 1000 new pods. bench/memory.py measures the
issue's full scale (100,000 pods over 1000 nodes) against a real server; this is the same on a small one.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from bench.memory import new_pod, zoned_workload
from bench.workload import POD_RULES
from rulesched.cluster.contexts import NodeContexts
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.cel import make_engine
from rulesched.rules.loader import load_rule_book

NODES, ZONES, WARMUP, PODS = 200, 40, 150, 900
GROWTH_LIMIT_MB = 6.0
"""Allowed growth over PODS new pods; without the renewal it was about 17 MB."""


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    pytest.skip("no /proc/self/status")


def test_new_workloads_do_not_grow_memory_with_the_default_engine(tmp_path: Path) -> None:
    (tmp_path / "zone.yaml").write_text(POD_RULES)
    book = load_rule_book([tmp_path], make_engine("cpp"))
    nodes, _ = zoned_workload(NODES, ZONES)
    contexts = NodeContexts(None, None).for_objects(nodes)
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for number in range(WARMUP):  # caches (bound programs, memos) filled to their bounds first
        evaluate(prepared(book), Call(new_pod(number, ZONES), contexts, Verb.FILTER, now))
    before = rss_mb()
    for number in range(WARMUP, WARMUP + PODS):
        decision = evaluate(prepared(book), Call(new_pod(number, ZONES), contexts, Verb.FILTER, now))
        assert 0 < len(decision.passed) <= NODES // ZONES  # the Ready nodes of the pod's zone
    growth = rss_mb() - before
    assert growth < GROWTH_LIMIT_MB, f"{growth:.1f} MB more after {PODS} new pods over {NODES} nodes"
