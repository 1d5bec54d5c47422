"""The rule files shipped in rules/: each loads on both engines, does what its comment says, and both
engines reach identical decisions over the example cluster in examples/cluster/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cluster.sources import FileMetricsSource, FileNodeSource
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import ENGINE_NAMES, Engine, make_engine
from rulesched.rules.context import NodeContext, NodeUsage, node_context
from rulesched.rules.loader import load_rule_book
from tests.builders import NOW, decide, make_context, make_node, make_pod, make_usage

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules"
CLUSTER = REPO / "examples" / "cluster"
SHIPPED = sorted(RULES.glob("*.yaml"))
GIB = 2.0**30


def only(rule_file: str, engine: Engine, tmp_path: Path) -> RuleBook:
    """A book holding one shipped rule file, so that each is tested on its own."""
    shutil.copy(RULES / rule_file, tmp_path / rule_file)
    return load_rule_book([tmp_path], engine)


def test_the_seven_rule_sets_are_shipped() -> None:
    assert [p.name for p in SHIPPED] == [
        "batch-spread.yaml",
        "cpu-window.yaml",
        "gpu-reserve.yaml",
        "memory-pressure.yaml",
        "team-pools.yaml",
        "xy-least-cpu.yaml",
        "zone-preference.yaml",
    ]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_rule_file_loads(path: Path, engine: Engine) -> None:
    book = load_rule_book([path], engine)
    assert [rs.name for rs in book.rule_sets] == [path.stem]
    assert book.rule_sets[0].filters or book.rule_sets[0].scores


def test_shipped_rules_directory_loads_sorted_by_name(engine: Engine) -> None:
    book = load_rule_book([RULES], engine)
    assert [rs.name for rs in book.rule_sets] == [
        "batch-spread",
        "cpu-window",
        "gpu-reserve",
        "memory-pressure",
        "team-pools",
        "xy-least-cpu",
        "zone-preference",
    ]


# (pod, node labels, cpu usage, passes, reason)
XY_CASES: list[tuple[dict[str, Any], dict[str, str] | None, float | None, bool, str | None]] = [
    (make_pod(), {"filter.xy.com": "true"}, 0.1, True, None),
    (make_pod(), {"filter.xy.com": ""}, None, True, None),
    (make_pod(), {"other": "x"}, 0.1, False, "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"),
    (make_pod(), None, 0.1, False, "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"),
    (make_pod(namespace="kube-system"), None, 0.1, True, None),
]


@pytest.mark.parametrize(("pod", "labels", "cpu", "passed", "reason"), XY_CASES)
def test_xy_least_cpu_requires_the_label(
    tmp_path: Path,
    engine: Engine,
    pod: dict[str, Any],
    labels: dict[str, str] | None,
    cpu: float | None,
    passed: bool,
    reason: str | None,
) -> None:
    book = only("xy-least-cpu.yaml", engine, tmp_path)
    usage = make_usage(cpu=cpu) if cpu is not None else None
    node = decide(book, pod, [make_context(make_node("n", labels=labels), usage)]).nodes["n"]
    assert (node.passed, node.reason) == (passed, reason)


def test_xy_least_cpu_ranks_by_lowest_cpu_usage(tmp_path: Path, engine: Engine) -> None:
    book = only("xy-least-cpu.yaml", engine, tmp_path)
    labelled = {"filter.xy.com": "true"}
    usages = {"busy": 1.5, "idle": 0.1, "middle": 0.8}
    contexts = [make_context(make_node(n, labels=labelled), make_usage(cpu=c)) for n, c in usages.items()]
    decision = decide(book, make_pod(), contexts)
    assert [(n.name, n.score) for n in decision.ranking()] == [("idle", 10), ("middle", 5), ("busy", 0)]


# (pod GPU request, node GPUs, passes)
GPU_CASES: list[tuple[str | None, str | None, bool]] = [
    (None, None, True),
    (None, "2", False),
    ("1", "2", True),
    ("1", None, True),  # kube-scheduler's own fit check rejects it, not this rule
    (None, "0", True),
]


@pytest.mark.parametrize(("pod_gpus", "node_gpus", "passed"), GPU_CASES)
def test_gpu_reserve_keeps_gpu_nodes_for_gpu_pods(
    tmp_path: Path, engine: Engine, pod_gpus: str | None, node_gpus: str | None, passed: bool
) -> None:
    book = only("gpu-reserve.yaml", engine, tmp_path)
    requests = {"cpu": "100m"} | ({"nvidia.com/gpu": pod_gpus} if pod_gpus else {})
    allocatable = {"cpu": "8"} | ({"nvidia.com/gpu": node_gpus} if node_gpus else {})
    decision = decide(book, make_pod(requests=requests), [make_context(make_node("n", allocatable=allocatable))])
    node = decision.nodes["n"]
    expected = (
        None
        if passed
        else "node reserved for pods that request nvidia.com/gpu (rule gpu-reserve/gpu-nodes-for-gpu-pods)"
    )
    assert (node.passed, node.reason, decision.errors) == (passed, expected, [])


# (memory utilization or None, passes, resolvable, audit outcome, score)
MEMORY_CASES: list[tuple[float | None, bool, bool, str, int]] = [
    (None, True, False, "pass", 0),
    (0.5, True, False, "pass", 5),
    (0.8, True, False, "fail", 2),
    (0.84, True, False, "fail", 2),
    (0.9, False, True, "fail", 0),
]


@pytest.mark.parametrize(("utilization", "passed", "resolvable", "audit", "score"), MEMORY_CASES)
def test_memory_pressure_rejects_above_85_and_audits_above_75(
    tmp_path: Path, engine: Engine, utilization: float | None, passed: bool, resolvable: bool, audit: str, score: int
) -> None:
    book = only("memory-pressure.yaml", engine, tmp_path)
    usage = make_usage(memory=utilization * 4 * GIB) if utilization is not None else None
    node_object = make_node("n", allocatable={"cpu": "2", "memory": "4Gi"})
    decision = decide(book, make_pod(), [make_context(node_object, usage)])
    node = decision.nodes["n"]
    reason = None if passed else "memory utilization above 85% (rule memory-pressure/memory-below-85-percent)"
    assert (node.passed, node.reason, node.resolvable) == (passed, reason, resolvable)
    assert [(f.rule, f.outcome, f.enforce) for f in node.filters] == [
        ("memory-below-85-percent", "pass" if passed else "fail", True),
        ("memory-below-75-percent", audit, False),
    ]
    assert node.score == (score if passed else None)
    assert decision.errors == []


# (pod zone label, node zone label, score)
ZONE_CASES: list[tuple[str | None, str | None, int, list[str]]] = [
    ("zone-a", "zone-a", 10, ["zone-preference"]),
    ("zone-a", "zone-b", 0, ["zone-preference"]),
    ("zone-a", None, 0, ["zone-preference"]),
    (None, "zone-a", 0, []),
]


@pytest.mark.parametrize(("pod_zone", "node_zone", "score", "applied"), ZONE_CASES)
def test_zone_preference_prefers_the_asked_zone(
    tmp_path: Path, engine: Engine, pod_zone: str | None, node_zone: str | None, score: int, applied: list[str]
) -> None:
    book = only("zone-preference.yaml", engine, tmp_path)
    pod = make_pod(labels={"rulesched.io/zone": pod_zone} if pod_zone else {"app": "web"})
    node = make_node("n", labels={"topology.kubernetes.io/zone": node_zone} if node_zone else None)
    decision = decide(book, pod, [make_context(node)])
    assert (decision.applied, decision.nodes["n"].passed, decision.nodes["n"].score) == (applied, True, score)
    assert decision.errors == []


# --- both engines over the example cluster -------------------------------------------------------


def example_cluster() -> list[NodeContext]:
    nodes = FileNodeSource(CLUSTER / "nodes.yaml")
    metrics = FileMetricsSource(CLUSTER / "metrics.yaml")
    names = [item["metadata"]["name"] for item in yaml.safe_load((CLUSTER / "nodes.yaml").read_text())["items"]]
    contexts = []
    for name in names:
        node = nodes.get(name)
        assert node is not None
        usage: NodeUsage | None = metrics.usage(name)
        contexts.append(node_context(node, usage, now=NOW))
    return contexts


EXAMPLE_PODS: dict[str, dict[str, Any]] = {
    "example-pod": json.loads((REPO / "examples" / "pod.json").read_text()),
    "plain": make_pod(requests={"cpu": "100m", "memory": "64Mi"}),
    "system": make_pod(namespace="kube-system"),
    "gpu": make_pod(requests={"cpu": "1", "nvidia.com/gpu": "1"}),
    "zone-b": make_pod(labels={"rulesched.io/zone": "zone-b"}),
    "sidecar": make_pod(
        requests={"cpu": "100m"},
        init_containers=[{"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}}],
    ),
}

# What the example cluster gives each pod: the ranking (name, score) of the nodes that pass. Worked by hand:
# free memory (Clamp, weight 0.5) is 6.909 on k8s-node1, 6.296 on k8s-node2, 5.351 on k8s-master and 9.375
# on gpu-node1; least CPU (MinMax, weight 1) over the passing labelled nodes; same zone (Clamp, weight 2).
EXPECTED_RANKING: dict[str, list[tuple[str, int]]] = {
    "example-pod": [("k8s-node2", 9), ("k8s-node1", 2)],  # (3.148 + 10) / 1.5 = 8.77; 3.455 / 1.5 = 2.30
    "plain": [("k8s-node2", 9), ("k8s-node1", 2)],
    "system": [("k8s-node1", 7), ("k8s-node2", 6), ("k8s-master", 5)],  # only memory-pressure and gpu-reserve
    "gpu": [("gpu-node1", 10), ("k8s-node2", 5), ("k8s-node1", 2)],  # k8s-node2: (3.148 + 4.255) / 1.5 = 4.94
    "zone-b": [("k8s-node2", 9), ("k8s-node1", 1)],  # (3.148 + 10 + 20) / 3.5 = 9.47; 3.455 / 3.5 = 0.99
    "sidecar": [("k8s-node2", 9), ("k8s-node1", 2)],
}


@pytest.mark.parametrize("pod_name", list(EXAMPLE_PODS))
def test_both_engines_reach_identical_decisions_over_the_example_cluster(pod_name: str) -> None:
    pod = EXAMPLE_PODS[pod_name]
    answers = {}
    for name in ENGINE_NAMES:
        book = load_rule_book([RULES], make_engine(name))
        answers[name] = decide(book, pod, example_cluster()).as_dict()
    assert answers["cpp"] == answers["celpy"]
    assert answers["cpp"]["errors"] == []
    assert [(r["name"], r["score"]) for r in answers["cpp"]["ranking"]] == EXPECTED_RANKING[pod_name]
