"""Names mode's node contexts: reused while the sources say nothing changed, rebuilt when they do.

The contexts are kept by name between requests and dropped only for the nodes a source reports as
changed (a watch event, a relist, a new metrics poll, a sample growing too old). These tests change
the cluster behind a loopback API server and check that the next lookup sees the change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rulesched.cluster.changelog import ChangeLog
from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.metrics.metrics_server import MetricsServerSource
from rulesched.cluster.nodes.nodecache import NodeCache
from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.sources import FileNodeSource
from rulesched.decide import reference
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.fast.outcomes import ScoreOutcome
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.cel import make_engine
from rulesched.rules.context import NodeContext, node_context, resource_numbers
from rulesched.rules.loader import load_rule_book
from tests.builders import make_pod, rule_set, write_rules
from tests.kubeapi import KubeAPI, wait_for
from tests.paths import EXAMPLE_NODES


def one(contexts: NodeContexts, name: str) -> NodeContext | None:
    known, unknown = contexts.for_names([name])
    assert len(known) + len(unknown) == 1
    return known[0] if known else None


def labels(context: NodeContext | None) -> dict[str, str]:
    assert context is not None
    found: dict[str, str] = context.node["metadata"].get("labels") or {}
    return found


def test_an_unchanged_node_keeps_its_context(cache: NodeCache) -> None:
    contexts = NodeContexts(cache, None)
    first = one(contexts, "node-a")
    assert first is not None
    assert one(contexts, "node-a") is first


def test_a_node_changed_by_a_watch_event_is_seen_by_the_next_lookup(cache: NodeCache, api: KubeAPI) -> None:
    contexts = NodeContexts(cache, None)
    other = one(contexts, "node-b")
    assert "filter.xy.com" not in labels(one(contexts, "node-c"))
    api.label_node("node-c", "filter.xy.com", "yes")
    wait_for(lambda: labels(one(contexts, "node-c")).get("filter.xy.com") == "yes", what="the new label")
    assert one(contexts, "node-b") is other, "a node that did not change was rebuilt"


def test_added_and_deleted_nodes_are_seen_by_the_next_lookup(cache: NodeCache, api: KubeAPI) -> None:
    contexts = NodeContexts(cache, None)
    assert one(contexts, "node-a") is not None
    api.add_node("node-n")
    wait_for(lambda: one(contexts, "node-n") is not None, what="node-n")
    api.delete_node("node-a")
    wait_for(lambda: cache.get("node-a") is None, what="node-a deleted")
    assert contexts.for_names(["node-a", "node-n"])[1] == ["node-a"]


def test_a_relist_is_seen_by_the_next_lookup(cache: NodeCache, api: KubeAPI) -> None:
    contexts = NodeContexts(cache, None)
    assert "after" not in labels(one(contexts, "node-b"))
    wait_for(lambda: bool(api.requests("GET /api/v1/nodes?allowWatchBookmarks=true")), what="the watch")
    api.expire(lambda: api.label_node("node-b", "after", "relist"))
    wait_for(lambda: labels(one(contexts, "node-b")).get("after") == "relist", what="the relisted node")


def test_a_new_metrics_poll_is_seen_by_the_next_lookup(access: KubeAccess, api: KubeAPI, cache: NodeCache) -> None:
    metrics = MetricsServerSource(access.api, interval=3600, max_age=90)
    contexts = NodeContexts(cache, metrics)
    assert metrics.poll()
    before = one(contexts, "node-a")
    assert before is not None
    assert before.metrics["cpu"]["usage"] == 0.25
    api.set_usage("node-a", "3", "1Gi")
    assert metrics.poll()
    after = one(contexts, "node-a")
    assert after is not None
    assert after.metrics["cpu"]["usage"] == 3.0


def test_a_sample_growing_too_old_is_dropped_without_a_new_poll(
    access: KubeAccess, api: KubeAPI, cache: NodeCache
) -> None:
    """The metrics source's generation moves when a sample ages out, even while polls fail."""
    metrics = MetricsServerSource(access.api, interval=3600, max_age=2)
    contexts = NodeContexts(cache, metrics)
    api.set_usage("node-a", "1", "1Gi", age=0)
    assert metrics.poll()
    fresh = one(contexts, "node-a")
    assert fresh is not None
    assert fresh.metrics["cpu"]["usage"] == 1.0
    api.set_metrics_status(503)
    assert not metrics.poll()
    wait_for(lambda: one(contexts, "node-a").metrics == {"custom": {}}, what="the sample to age out")  # type: ignore[union-attr]


def test_change_log_names_what_changed_after_a_generation() -> None:
    log = ChangeLog(kept=3)
    start = log.generation()
    log.record("a")
    middle = log.generation()
    log.record("b")
    log.record("a")
    assert log.since(start) == {"a", "b"}
    assert log.since(middle) == {"a", "b"}
    assert log.since(log.generation()) == set()


def test_change_log_forgets_beyond_what_it_keeps_and_says_so() -> None:
    log = ChangeLog(kept=2)
    start = log.generation()
    for name in ("a", "b", "c"):
        log.record(name)
    assert log.since(start) is None, "a change older than the log was lost silently"
    assert log.since(start + 1) == {"b", "c"}


def test_change_log_relist_means_everything_changed() -> None:
    log = ChangeLog()
    start = log.generation()
    log.record("a")
    log.record(None)
    assert log.since(start) is None
    after = log.generation()
    log.record("b")
    assert log.since(after) == {"b"}


def test_nodes_of_one_instance_type_share_their_allocatable_numbers() -> None:
    """Parsing quantities is most of what a new context costs (every metrics poll makes new ones)."""

    def node(name: str, memory: str) -> dict[str, Any]:
        allocatable = {"cpu": "3910m", "memory": memory, "pods": "110", "nvidia.com/gpu": "1"}
        return {"metadata": {"name": name, "resourceVersion": "1"}, "status": {"allocatable": allocatable}}

    first, second = node_context(node("a", "15Gi"), None), node_context(node("b", "15Gi"), None)
    other = node_context(node("c", "31Gi"), None)
    assert first.allocatable == {"cpu": 3.91, "memory": 15 * 2.0**30, "pods": 110.0, "nvidia.com/gpu": 1.0}
    assert first.allocatable == resource_numbers(node("a", "15Gi")["status"]["allocatable"])
    assert second.allocatable is first.allocatable
    assert other.allocatable["memory"] == 31 * 2.0**30


def test_a_pod_event_keeps_the_results_of_rules_that_read_no_pods(tmp_path: Path) -> None:
    """Only the node the pod event names gets a new context; rules that read none of `pods`, `allocated`
    and `recent` keep their results (the memo moves to the new context), rules that read them do not."""
    nodes = FileNodeSource(EXAMPLE_NODES)
    names = ["k8s-node1", "k8s-node2"]
    for expression, kept in (("has(node.metadata.labels)", True), ("allocated.pods < 3.0", False)):
        index = PodIndex()
        contexts = NodeContexts(nodes, None, index)
        directory = tmp_path / str(kept)
        write_rules(directory, rule_set("r", f"filters:\n- name: f\n  expression: {expression!r}\n  message: full"))
        book = load_rule_book([directory], make_engine("cpp"))
        before = contexts.for_names(names)[0]
        evaluate(prepared(book), Call(make_pod(), before))
        memo = prepared(book).caches.memo_of[before[0]]
        bound = make_pod(name="other")
        bound["metadata"]["uid"] = "uid-other"
        bound["spec"]["nodeName"] = "k8s-node1"
        index.apply("ADDED", bound)
        after = contexts.for_names(names)[0]
        assert after[1] is before[1], "a node without pod events keeps its context"
        assert after[0] is not before[0]
        assert after[0].pods.allocated["pods"] == 1.0
        assert evaluate(prepared(book), Call(make_pod(), after)).nodes["k8s-node1"].passed
        assert (prepared(book).caches.memo_of[after[0]] is memo) is kept
        assert before[0] not in prepared(book).caches.memo_of, "the plan keeps one memo per node name"


def test_the_plan_keeps_one_memo_per_node_name(tmp_path: Path) -> None:
    """Each pod event gives its node a new context; the plan's memos do not pile up with them."""
    nodes = FileNodeSource(EXAMPLE_NODES)
    names = ["k8s-node1", "k8s-node2"]
    index = PodIndex()
    contexts = NodeContexts(nodes, None, index)
    write_rules(tmp_path, rule_set("r", "filters:\n- name: f\n  expression: allocated.pods < 300.0\n  message: full"))
    book = load_rule_book([tmp_path], make_engine("cpp"))
    for i in range(50):
        bound = make_pod(name=f"p{i}")
        bound["metadata"]["uid"] = f"uid-{i}"
        bound["spec"]["nodeName"] = names[i % 2]
        index.apply("ADDED", bound)
        assert evaluate(prepared(book), Call(make_pod(), contexts.for_names(names)[0])).nodes[names[i % 2]].passed
    assert len(prepared(book).caches.memo_of) == 2


NODES = ["node-a", "node-b", "node-c", "node-d", "node-e"]
LABELLED = """\
- name: labelled
  expression: "has(node.metadata.labels) && 'filter.xy.com' in node.metadata.labels"
  message: no label
"""
IDLE = """\
- name: idle-enough
  expression: "!has(metrics.cpu) || metrics.cpu.usage < 2.0"
  message: too busy
"""
SCORES = """\
scores:
- name: least-cpu
  expression: "has(metrics.cpu) ? -metrics.cpu.usage : 0.0"
"""


@pytest.mark.parametrize(
    "filters", [LABELLED, LABELLED + IDLE], ids=["filter-reads-no-metrics", "filter-reads-metrics"]
)
def test_a_new_metrics_sample_recomputes_exactly_what_reads_metrics(
    access: KubeAccess, api: KubeAPI, cache: NodeCache, tmp_path: Path, filters: str
) -> None:
    """After a poll (every node's sample new), a node's context is rebuilt with its memo made again from the
    old one: its values but `metrics` are not converted again, results of rules that read no `metrics`
    are kept (filter verdicts too, when no filter reads it), every rule that reads it runs again, and
    the answers are the reference evaluation's, filter and prioritize."""
    metrics = MetricsServerSource(access.api, interval=3600, max_age=90)
    contexts = NodeContexts(cache, metrics)
    write_rules(tmp_path, rule_set("r", "filters:\n" + filters + SCORES))
    book = load_rule_book([tmp_path], make_engine("cpp"))
    pod = make_pod()
    assert metrics.poll()
    before = contexts.for_names(NODES)[0]
    evaluate(prepared(book), Call(pod, before))
    old = prepared(book).caches.memo_of[before[0]]
    (old_verdict,) = [table[before[0]] for table in prepared(book).caches.filter_tables.values()]
    api.set_usage("node-a", "3", "1Gi")
    assert metrics.poll()
    after = contexts.for_names(NODES)[0]
    for verb in (Verb.FILTER, Verb.PRIORITIZE, Verb.EXPLAIN):
        assert evaluate(prepared(book), Call(pod, after, verb)) == reference.evaluate(book, Call(pod, after, verb))
    new = prepared(book).caches.memo_of[after[0]]
    assert after[0] is not before[0]
    assert after[0].metrics["cpu"]["usage"] == 3.0
    assert new.values["node"] is old.values["node"], "the node was converted again"
    assert new.node_only is not None
    assert old.node_only is not None
    new_score, old_score = new.node_only[-1], old.node_only[-1]
    assert isinstance(new_score, ScoreOutcome)
    assert isinstance(old_score, ScoreOutcome)
    assert (new_score.raw, old_score.raw) == (-3.0, -0.25), "the score reading metrics did not run"
    (new_verdict,) = [table[after[0]] for table in prepared(book).caches.filter_tables.values()]
    assert (new_verdict is old_verdict) is (filters == LABELLED), "filter verdicts taken over only when they hold"
    assert evaluate(prepared(book), Call(pod, after, Verb.FILTER)).nodes["node-a"].passed is (filters == LABELLED)
