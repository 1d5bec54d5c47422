"""The writer (`extender/recording.py`) and the reader (`tools/recording_read.py`) agree on every key of the
format (`recording_format.py`): a call written by the one is read back by the other as it was decided, the
pods on each node (`pods`, `allocated`, `recent`, `recentUids`) included."""

from __future__ import annotations

import datetime
from pathlib import Path

from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.extender.recording import Segment
from rulesched.handoff.answered import Answered
from rulesched.rules.cel import make_engine
from rulesched.rules.context import node_context, node_pods
from rulesched.rules.loader import load_rule_book
from rulesched.rules.pod_values import pod_view
from rulesched.tools.recording_read import Call as Recorded
from rulesched.tools.recording_read import Recording, read_calls
from tests.builders import NOW, make_node, make_pod, make_usage
from tests.rulebooks import LIVE, rules_dir


def answered(tmp_path: Path, verb: Verb) -> Answered:
    """A call over two labelled nodes, one with two pods on it (one of them placed since the metrics sample)."""
    book = load_rule_book([rules_dir(tmp_path / "rules", LIVE)], make_engine("cpp"))
    running = make_pod("db-0", requests={"cpu": "500m", "memory": "1Gi"})
    placed = make_pod("web-1", requests={"cpu": "250m", "memory": "256Mi"})
    views = [pod_view(running), pod_view(placed)]
    pods = node_pods(views, [pod_view(placed)], ("busy", 3), [{"cpu": 0.3, "memory": 300e6}])
    labels = {"filter.xy.com": "yes"}
    nodes = [
        node_context(make_node("busy", labels), make_usage(0.5, 2e9, age=10), NOW, pods),
        node_context(make_node("idle", labels), make_usage(0.1, 1e9, age=10), NOW),
    ]
    pod = make_pod("web-2", requests={"cpu": "250m"})
    namespace = {"metadata": {"name": "default", "resourceVersion": "9", "labels": {"team": "shop"}}}
    decision = evaluate(prepared(book), Call(pod, nodes, verb, NOW))
    return Answered(verb.value, True, pod, nodes, {"gone": "node(s) not found"}, namespace, NOW, book, decision,
                    {"cpu": 0.3, "memory": 3e8})  # fmt: skip


def written_and_read(tmp_path: Path, call: Answered) -> list[Recorded]:
    segment = Segment(tmp_path / "segment-000001.jsonl.gz", 1)
    segment.write(call)
    segment.close()
    return list(read_calls(Recording(segment.path)))


def test_a_filter_call_written_is_read_back_as_it_was_decided(tmp_path: Path) -> None:
    live = answered(tmp_path, Verb.FILTER)
    [read] = written_and_read(tmp_path, live)
    assert (read.verb, read.mode, read.pod, read.namespace) == ("filter", "full", live.pod, live.namespace)
    assert read.now == NOW.replace(tzinfo=datetime.UTC)
    assert read.unknown == {"gone": "node(s) not found"}
    assert read.estimate == {"cpu": 0.3, "memory": 3e8}
    assert read.rules == {"generation": live.book.generation, "hash": live.book.hash}
    assert read.decision["passed"] == ["busy", "idle"]
    assert read.decision["deadlineExceeded"] is False
    for seen, was in zip(read.contexts, live.contexts, strict=True):
        assert (seen.name, seen.node, seen.metrics, seen.allocatable) == (
            was.name,
            was.node,
            was.metrics,
            was.allocatable,
        )
        assert list(seen.pods.pods) == list(was.pods.pods)
        assert seen.pods.allocated == was.pods.allocated
        assert seen.pods.recent == was.pods.recent
        assert seen.pods.recent_uids == was.pods.recent_uids
    assert read.contexts[0].pods.allocated["pods"] == 2.0
    assert read.contexts[0].pods.recent["count"] == 1.0
    assert read.contexts[0].pods.recent_uids == {"uid-default-web-1"}


def test_a_prioritize_call_written_is_read_back_with_its_scores(tmp_path: Path) -> None:
    live = answered(tmp_path, Verb.PRIORITIZE)
    [read] = written_and_read(tmp_path, live)
    assert read.verb == "prioritize"
    assert read.decision["scores"] == {name: node.score for name, node in live.decision.nodes.items()}
    assert read.decision["deadlineExceeded"] is False
