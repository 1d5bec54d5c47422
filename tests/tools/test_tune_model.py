"""The placement model of `rulesched tune`: kube-scheduler's filters and score plugins by their formulas, and
pods placed one by one with the rules evaluated as the server evaluates them, `recent` and the metrics polls
included, and a placed pod using what it really uses."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from rulesched.rules.book import RuleBook
from rulesched.rules.cel import make_engine
from rulesched.tools.tune.kube import DEFAULT_WEIGHTS, Demand, NodeState, fits, plugin_scores
from rulesched.tools.tune.model import Arrival, Scene, Weights, extender_score, simulate
from tests.builders import load_spec, make_node, make_pod

START = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
LEAST_USED = """
scores:
- name: least-used
  expression: -(metrics.cpu.usage + recent.estimates.cpu)
"""
NO_PLUGINS: dict[str, int] = {}


@pytest.fixture
def least_used(tmp_path: Path) -> RuleBook:
    return load_spec(tmp_path, make_engine("cpp"), LEAST_USED, name="balance")


def owned(name: str, owner: str = "web") -> dict[str, Any]:
    pod = make_pod(name, requests={"cpu": "500m", "memory": "512Mi"})
    pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}"}]
    return pod


def scene(arrivals: list[Arrival], nodes: int = 2, interval: float = 15.0, **base: float) -> Scene:
    objects = [
        make_node(f"node-{i}", {"kubernetes.io/hostname": f"node-{i}"}, {"cpu": "4", "memory": "8Gi"})
        for i in range(nodes)
    ]
    loads = {f"node-{i}": (base.get(f"node_{i}", 0.0), 0.0) for i in range(nodes)}
    return Scene(objects, loads, [], arrivals, START, interval, 30.0)


def arrival(at: float, name: str, cpu: float = 0.5) -> Arrival:
    return Arrival(at, owned(name), cpu, 0.0, {"cpu": cpu, "memory": 0.0})


# -- kube-scheduler's plugins ---------------------------------------------------------------------------------


def state(cpu: str = "4", memory: str = "8Gi", **labels: str) -> NodeState:
    return NodeState(make_node("n", dict(labels) or None, {"cpu": cpu, "memory": memory, "pods": "110"}))


def test_least_allocated_and_balanced_allocation_follow_kube_schedulers_integer_formulas() -> None:
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"})
    node = state()
    node.add(Demand.of(make_pod(requests={"cpu": "1", "memory": "3Gi"})), None)
    only_fit = {"NodeResourcesFit": 1}
    # cpu (4000-2000)*100/4000 = 50, memory (8-4)*100/8 = 50: LeastAllocated 50
    assert plugin_scores(pod, Demand.of(pod), [node], only_fit, 1) == [50]
    # fractions 0.5 and 0.5: balanced 100
    assert plugin_scores(pod, Demand.of(pod), [node], {"NodeResourcesBalancedAllocation": 1}, 1) == [100]


def test_a_container_without_requests_counts_kube_schedulers_defaults_for_least_allocated() -> None:
    assert Demand.of(make_pod(requests=None)) == Demand(0, 0, 100, 200 * 1024 * 1024)


def test_filters_refuse_untolerated_taints_unmatched_selectors_and_full_nodes() -> None:
    pod = make_pod(requests={"cpu": "3"})
    tainted = state()
    tainted.node["spec"] = {"taints": [{"key": "infra", "effect": "NoSchedule"}]}  # type: ignore[index]
    assert not fits(pod, Demand.of(pod), tainted)
    assert fits(pod, Demand.of(pod), state())
    assert not fits(pod, Demand.of(pod), state(cpu="2"))
    selecting = make_pod(requests={"cpu": "1"})
    selecting["spec"]["nodeSelector"] = {"zone": "a"}
    assert fits(selecting, Demand.of(selecting), state(zone="a"))
    assert not fits(selecting, Demand.of(selecting), state(zone="b"))


def test_prefer_no_schedule_taints_and_preferred_affinity_score_as_kube_scheduler_normalizes_them() -> None:
    pod = make_pod(requests={"cpu": "1"})
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
            ]
        }
    }
    tainted, plain = state(zone="a"), state(zone="b")
    tainted.node["spec"] = {"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}  # type: ignore[index]
    assert plugin_scores(pod, Demand.of(pod), [tainted, plain], {"TaintToleration": 1}, 2) == [0, 100]
    assert plugin_scores(pod, Demand.of(pod), [tainted, plain], {"NodeAffinity": 1}, 2) == [100, 0]


def test_default_topology_spread_prefers_the_node_with_fewer_pods_of_the_same_controller() -> None:
    crowded, empty = state(**{"kubernetes.io/hostname": "a"}), state(**{"kubernetes.io/hostname": "b"})
    for index in range(3):
        crowded.add(Demand.of(owned(f"web-{index}")), "uid-web")
    pod = owned("web-9")
    low, high = plugin_scores(pod, Demand.of(pod), [crowded, empty], {"PodTopologySpread": 1}, 2)
    assert low < high == 100
    assert plugin_scores(make_pod(), Demand.of(make_pod()), [crowded, empty], {"PodTopologySpread": 1}, 2) == [0, 0]


# -- the extender's score with other weights ------------------------------------------------------------------


def test_the_extender_score_is_the_weighted_mean_of_the_rules_normalized_scores(tmp_path: Path) -> None:
    spec = """
    scores:
    - name: a
      expression: "node.metadata.name == 'node-0' ? 1.0 : 0.0"
    - name: b
      expression: "node.metadata.name == 'node-1' ? 1.0 : 0.0"
    """
    book = load_spec(tmp_path, make_engine("cpp"), spec, name="two")
    from tests.builders import decide, make_context

    decision = decide(book, make_pod(), [make_context(make_node("node-0")), make_context(make_node("node-1"))])
    scores = decision.nodes["node-0"].scores
    assert extender_score(scores, {}) == 5
    assert extender_score(scores, {"two/a": 3.0, "two/b": 1.0}) == 8  # 10 * 3/4 = 7.5, rounded half up


# -- placing pods ---------------------------------------------------------------------------------------------


def test_a_pod_placed_since_the_last_sample_counts_in_recent_so_the_next_goes_elsewhere(least_used: RuleBook) -> None:
    pods = [arrival(1.0, "web-0"), arrival(1.1, "web-1")]
    for seed in range(4):
        outcome = simulate(scene(pods), least_used, NO_PLUGINS, Weights({}, 1.0), seed)
        assert sorted(outcome.placements.values()) == ["node-0", "node-1"]


def test_a_pod_counts_in_its_nodes_sample_once_polled_and_not_twice(least_used: RuleBook) -> None:
    # node-1 runs 0.8 cores more; a 1-core pod lands on node-0 at t=1. Polled at t=15 (with recent 30 s, the
    # pod would count twice if `recent` did not start at the sample): node-0 then uses 1, node-1 0.8.
    pods = [arrival(1.0, "web-0", cpu=1.0), arrival(20.0, "web-1", cpu=1.0)]
    outcome = simulate(scene(pods, node_1=0.8), least_used, NO_PLUGINS, Weights({}, 1.0), 0)
    assert outcome.placements == {"default/web-0": "node-0", "default/web-1": "node-1"}


def test_a_placed_pod_uses_what_it_really_uses_not_its_requests(least_used: RuleBook) -> None:
    outcome = simulate(scene([arrival(1.0, "web-0", cpu=1.5)]), least_used, NO_PLUGINS, Weights({}, 1.0), 0)
    assert sorted(outcome.cpu.values()) == [0.0, 1.5]


def test_the_same_seed_places_the_same_way(least_used: RuleBook) -> None:
    pods = [arrival(0.5 * i, f"web-{i}", cpu=0.2 + 0.1 * (i % 3)) for i in range(12)]
    runs = [simulate(scene(pods, nodes=3), least_used, DEFAULT_WEIGHTS, Weights({}, 1.0), 7) for _ in range(2)]
    assert runs[0].placements == runs[1].placements
    assert runs[0].cpu == runs[1].cpu


def test_a_pod_no_node_fits_is_counted_unschedulable(least_used: RuleBook) -> None:
    huge = Arrival(1.0, make_pod("huge", requests={"cpu": "64"}), 1.0, 0.0)
    outcome = simulate(scene([huge]), least_used, NO_PLUGINS, Weights({}, 1.0), 0)
    assert outcome.unschedulable == 1
    assert outcome.figures(0.8)["unschedulable"] == 1.0
