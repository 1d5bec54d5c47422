"""The fast engine gives exactly the reference evaluator's Decision, whatever its caches hold.

A differential test over seeded random rule books, nodes, metrics and pods, on both CEL engines:
sequences of calls that repeat pods (replicas), change node versions and metrics between calls, run
filter-only, score-only and complete evaluations, move the clock, and reload the rule book — each
answer compared with `rulesched.decide.reference.evaluate` over the same inputs.
"""

from __future__ import annotations

import datetime
import functools
import random
from pathlib import Path
from typing import Any

import pytest

from rulesched.decide import reference
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.fast.keys import trim
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import ENGINE_NAMES, Engine, EngineName, make_engine
from rulesched.rules.cel.analysis import PRESENT, paths
from rulesched.rules.context import (
    NodeContext,
    NodeCustom,
    NodePods,
    NodeUsage,
    node_context,
    node_pods,
    with_custom,
    with_sample,
)
from rulesched.rules.loader import load_rule_book
from rulesched.rules.pod_values import pod_view
from tests.builders import NOW, make_pod, make_usage, rule_set, write_rules

VARIABLES = """\
variables:
- name: cpuUsed
  expression: metrics.cpu.usage
- name: free
  expression: allocatable.cpu - variables.cpuUsed
"""
CONDITIONS = [
    "pod.metadata.namespace != 'kube-system'",
    "has(pod.metadata.labels) && 'app' in pod.metadata.labels",
    "pod.metadata.labels['app'] != 'skip'",
    "now > timestamp('2020-01-01T00:00:00Z')",
    "!('team' in namespaceObject.metadata.labels) || namespaceObject.metadata.labels['team'] != 'skip'",
]
CUSTOM_FILTERS = [
    "!has(metrics.custom) || !has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.5",
    "metrics.?custom.?cpu5m.orValue(0.0) < 0.5",
    "metrics.custom[?'mem'].orValue(1.0) > 0.3",
    "!('cpu5m' in metrics.custom) || metrics.custom['cpu5m'] < 0.5",
    "metrics.custom.all(k, metrics.custom[k] < 0.8)",
    "cel.bind(c, metrics.custom, !has(c.mem) || c.mem < 0.5)",
    "cel.bind(m, metrics, has(m.custom) && m.custom.exists(k, k == 'cpu5m'))",
    "metrics.custom.cpu5m < 0.5",
]
"""Filters reading `metrics.custom` (defined by `METRIC_SOURCE`) in each guarded form, and one unguarded."""
NODE_FILTERS = [
    "has(node.metadata.labels) && 'filter.xy.com' in node.metadata.labels",
    "node.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
    "!has(metrics.cpu) || metrics.cpu.utilization < 0.7",
    "allocatable.cpu >= 4.0",
    "node.metadata.labels['tier'] == 'gold'",
    "variables.free > 1.0",
    "node.metadata.size() >= 3",
    "('fil' + 'ter.xy.com') in node.metadata.labels",
    "has(node.metadata.labels) && node.metadata.labels.exists(k, k.startsWith('zo'))",
    "allocated.cpu + 1.0 <= allocatable.cpu && allocated.pods < 3.0",
    "pods.all(p, !('app' in p.metadata.labels) || p.metadata.labels['app'] != 'db')",
    "recent.count < 2.0 || recent.requests.cpu < 1.0",
    *CUSTOM_FILTERS,
    "recent.estimates.cpu < 1.5",
]
POD_FILTERS = [
    "!has(pod.metadata.labels) || !('zone' in pod.metadata.labels)"
    " || (has(node.metadata.labels) && 'zone' in node.metadata.labels"
    " && node.metadata.labels['zone'] == pod.metadata.labels['zone'])",
    "requests.cpu + (has(metrics.cpu) ? metrics.cpu.usage : 0.0) < allocatable.cpu",
    "pod.spec.containers.size() <= 1 || node.metadata.labels['tier'] == 'gold'",
    "now > timestamp('2020-01-01T00:00:00Z') && pod.metadata.namespace != 'blocked'",
    "size(pod) > 3 || allocatable.cpu > 2.0",
    "!has(pod.metadata.labels) || !('app' in pod.metadata.labels) || 'tier' in node.metadata.labels",
    "has(pod.metadata.labels) && pod.metadata.labels.size() > 1 && has(node.metadata.labels)",
    "!has(pod.metadata.labels) || !('app' in pod.metadata.labels)"
    " || pods.filter(p, 'app' in p.metadata.labels && p.metadata.labels['app'] == pod.metadata.labels['app'])"
    ".size() < 2",
    "allocated.cpu + requests.cpu <= allocatable.cpu",
    "!has(pod.metadata.labels) || !('app' in pod.metadata.labels) || !has(metrics.custom)"
    " || metrics.custom[?'cpu5m'].orValue(0.0) < (pod.metadata.labels['app'] == 'db' ? 0.3 : 0.6)",
    "cel.bind(c, metrics.custom, !('mem' in c) || c['mem'] * requests.cpu < 0.5)",
    "(has(metrics.cpu) ? metrics.cpu.usage : 0.0) + recent.estimates.cpu + estimate.cpu < allocatable.cpu",
    "estimate.samples > 0.0 || requests.cpu < 2.0",
    "!('team' in namespaceObject.metadata.labels) || namespaceObject.metadata.labels['team'] != 'ml'"
    " || (has(node.metadata.labels) && 'tier' in node.metadata.labels)",
    "has(metrics) && has(pod) && (!has(metrics.custom) || metrics.custom[?'cpu5m'].orValue(0.0) < 0.6)",
]
MESSAGES = ["", "'wants zone ' + pod.metadata.labels['zone']", "'node ' + node.metadata.name + ' lacks it'"]
SCORES = [
    ("-variables.cpuUsed", "MinMax"),
    ("has(metrics.memory) ? 10.0 * (1.0 - metrics.memory.utilization) : 0.0", "Clamp"),
    ("allocatable.cpu", "MinMax"),
    (
        "has(pod.metadata.labels) && 'zone' in pod.metadata.labels && has(node.metadata.labels)"
        " && 'zone' in node.metadata.labels && node.metadata.labels['zone'] == pod.metadata.labels['zone'] ? 10 : 0",
        "Clamp",
    ),
    ("allocatable.cpu - requests.cpu", "MinMax"),
    ("double(pod.metadata.name.size()) - variables.free", "MinMax"),
    ("-(metrics.cpu.usage + recent.requests.cpu)", "MinMax"),
    ("-allocated.cpu", "MinMax"),
    ("-(metrics.cpu.usage + recent.estimates.cpu + estimate.cpu)", "MinMax"),
    ("10.0 - double(pods.size())", "Clamp"),
    (
        "'team' in namespaceObject.metadata.labels && namespaceObject.metadata.labels['team'] == 'ml'"
        " ? allocatable.cpu : 0.0",
        "MinMax",
    ),
    ("has(metrics.custom.cpu5m) ? 10.0 * (1.0 - metrics.custom.cpu5m) : 0.0", "Clamp"),
    ("metrics.custom.?mem.orValue(0.0) * double(size(pod.metadata.name))", "MinMax"),
    ("metrics.custom[?'mem'].orValue(1.0) + (has(metrics.custom) ? 0.0 : 1.0)", "MinMax"),
    ("cel.bind(c, metrics.custom, double(c.size()) + ('cpu5m' in c ? c['cpu5m'] : 0.0))", "MinMax"),
]
METRIC_SOURCE = """\
apiVersion: rulesched.io/v1alpha1
kind: MetricSource
metadata: {name: prometheus}
spec:
  prometheus: {url: "http://prometheus.monitoring.svc:9090"}
  queries:
  - {name: cpu5m, query: "cpu5m"}
  - {name: mem, query: "mem"}
"""
"""Defines the custom metrics the rules read; every book has it (a MetricSource is never polled here)."""


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _filter(rng: random.Random, index: int) -> str:
    expression = rng.choice(NODE_FILTERS + POD_FILTERS)
    lines = [f"- name: f{index}", f"  expression: {_quoted(expression)}", f"  message: failed f{index}"]
    message = rng.choice(MESSAGES)
    if message:
        lines.append(f"  messageExpression: {_quoted(message)}")
    lines += [
        f"  mode: {rng.choice(['Enforce', 'Enforce', 'Audit'])}",
        f"  failurePolicy: {rng.choice(['Fail', 'Ignore'])}",
        f"  resolvableByPreemption: {rng.choice(['true', 'false'])}",
    ]
    return "\n".join(lines)


def _score(rng: random.Random, index: int) -> str:
    expression, normalize = rng.choice(SCORES)
    return "\n".join(
        [
            f"- name: s{index}",
            f"  expression: {_quoted(expression)}",
            f"  normalize: {normalize}",
            f"  weight: {rng.choice([1, 2, 0.5])}",
            f"  mode: {rng.choice(['Enforce', 'Enforce', 'Audit'])}",
        ]
    )


def random_rule_sets(rng: random.Random) -> list[str]:
    documents = []
    for number in range(rng.randint(1, 3)):
        spec = [VARIABLES]
        conditions = rng.sample(CONDITIONS, rng.randint(0, 2))
        if conditions:
            spec.append("matchConditions:")
            spec += [f"- name: c{i}\n  expression: {_quoted(c)}" for i, c in enumerate(conditions)]
        spec.append("filters:")
        spec += [_filter(rng, i) for i in range(rng.randint(1, 3))]
        spec.append("scores:")
        spec += [_score(rng, i) for i in range(rng.randint(1, 3))]
        documents.append(rule_set(f"set-{number}", "\n".join(spec)))
    return documents


def load(tmp_path: Path, engine: Engine, documents: list[str], generation: int) -> RuleBook:
    directory = tmp_path / f"rules-{generation}"
    for index, text in enumerate(documents):
        write_rules(directory, text, f"{index}.yaml")
    write_rules(directory, METRIC_SOURCE, "source.yaml")
    return load_rule_book([directory], engine, generation=generation)


def random_node(rng: random.Random, index: int, version: int) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": f"n-{index}"}
    for key, values in (("filter.xy.com", ["true"]), ("zone", ["a", "b", "c"]), ("tier", ["gold", "silver"])):
        if rng.random() < 0.7:
            labels[key] = rng.choice(values)
    cpu = rng.choice(["2", "4", "3500m", "8"])
    resources = {"cpu": cpu, "memory": rng.choice(["8Gi", "16Gi"]), "pods": "110"}
    metadata: dict[str, Any] = {"name": f"n-{index}", "resourceVersion": str(version)}
    if rng.random() < 0.9:
        metadata["labels"] = labels
    ready = "True" if rng.random() < 0.8 else "False"
    conditions = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    return {"metadata": metadata, "status": {"allocatable": resources, "capacity": resources, "conditions": conditions}}


def random_usage(rng: random.Random) -> NodeUsage | None:
    if rng.random() < 0.2:
        return None
    cpu = rng.choice([None, rng.uniform(0.1, 6.0)])
    return make_usage(cpu=cpu, memory=rng.choice([None, rng.uniform(1e8, 1.5e10)]), age=rng.choice([None, 5.0]))


def random_custom(rng: random.Random) -> NodeCustom:
    """The node's custom metric values: each of them, or none (Prometheus has none for the node)."""
    return NodeCustom({k: rng.choice([0.2, 0.4, 0.7]) for k in ("cpu5m", "mem") if rng.random() < 0.6})


def workload_pod(rng: random.Random, workload: int, replica: int) -> dict[str, Any]:
    """Replica `replica` of `workload`: replicas share everything but their name and uid."""
    template = random.Random(workload)
    labels = {"app": template.choice(["web", "skip", "db"]), "zone": template.choice(["a", "b", "c"])}
    if template.random() < 0.2:
        del labels["zone"]
    requests: list[dict[str, str]] = [{"cpu": template.choice(["500m", "1", "3"])}]
    if template.random() < 0.3:
        requests = [{"memory": "1Gi"}, {"cpu": "250m"}]
    pod = make_pod(
        name=f"w{workload}-{replica}",
        namespace=template.choice(["default", "default", "kube-system", "blocked"]),
        labels=labels if template.random() < 0.9 else None,
        requests=requests,
    )
    return pod


def random_pods(rng: random.Random, version: int) -> NodePods:
    """A few pods on a node, some of them placed after its metrics sample (`recent`)."""
    views = []
    for index in range(rng.choice([0, 0, 1, 2, 3])):
        labels = {"app": rng.choice(["web", "db", "batch"])} if rng.random() < 0.8 else None
        pod = make_pod(name=f"p{version}-{index}", labels=labels, requests={"cpu": rng.choice(["100m", "1", "2"])})
        pod["metadata"]["uid"] = f"uid-{version}-{index}"
        views.append(pod_view(pod))
    recent = [v for v in views if rng.random() < 0.4]
    estimates = [{"cpu": rng.choice([0.1, 0.5, 1.5]), "memory": 1e8} for _ in recent]
    return node_pods(views, recent, version, estimates if rng.random() < 0.7 else None)


def random_estimate(rng: random.Random) -> dict[str, float] | None:
    """The pod's `estimate` as the usage store may give it: none (the fallback, its requests), or learnt."""
    if rng.random() < 0.3:
        return None
    return {"cpu": rng.choice([0.2, 0.5, 1.5]), "memory": 2e8, "samples": float(rng.choice([1, 3]))}


def random_namespace(rng: random.Random, pod: dict[str, Any]) -> dict[str, Any] | None:
    if rng.random() < 0.2:
        return None
    labels = {"team": rng.choice(["ml", "web", "skip"])} if rng.random() < 0.7 else {}
    return {"metadata": {"name": pod["metadata"]["namespace"], "labels": labels}}


class Cluster:
    """Node contexts kept between calls, as the extender keeps them, with versions that move."""

    def __init__(self, rng: random.Random, size: int) -> None:
        self.rng = rng
        self.version = 1
        self.contexts = [self._context(i) for i in range(size)]

    def _context(self, index: int) -> NodeContext:
        self.version += 1
        node, usage = random_node(self.rng, index, self.version), random_usage(self.rng)
        pods = random_pods(self.rng, self.version)
        return node_context(node, usage, now=NOW, pods=pods, custom=random_custom(self.rng))

    def churn(self) -> None:
        """A new version of a few nodes (their object or their metrics sample)."""
        for index in self.rng.sample(range(len(self.contexts)), 2):
            self.contexts[index] = self._context(index)

    def resample(self) -> None:
        """A new metrics sample (a metrics-server poll) or new custom values (a Prometheus poll) for a few
        nodes, their objects and pods unchanged, made as the names-mode contexts make them: the memo is
        made again from the old one."""
        for index in self.rng.sample(range(len(self.contexts)), 3):
            old = self.contexts[index]
            if self.rng.random() < 0.5:
                self.contexts[index] = with_sample(old, random_usage(self.rng), old.pods, now=NOW, custom=old.key[4])
            else:  # a Prometheus poll: only the custom values change
                self.contexts[index] = with_custom(old, random_custom(self.rng))

    def candidates(self) -> list[NodeContext]:
        chosen = self.rng.sample(self.contexts, self.rng.randint(1, len(self.contexts)))
        return chosen


@functools.cache
def engine_named(name: EngineName) -> Engine:
    return make_engine(name)


def run_calls(tmp_path: Path, engine: Engine, seed: int, calls: int, size: int = 10) -> int:
    """Random calls over `size` nodes compared with the reference; how many were compared."""
    rng = random.Random(seed)
    documents = random_rule_sets(rng)
    book = load(tmp_path, engine, documents, 1)
    cluster = Cluster(rng, size)
    for call in range(calls):
        event = rng.random()
        if event < 0.15:
            cluster.churn()
        elif event < 0.2:
            cluster.resample()
        elif event < 0.25:
            documents = documents if rng.random() < 0.5 else random_rule_sets(rng)
            book = load(tmp_path, engine, documents, book.generation + 1)
        pod = workload_pod(rng, rng.randint(0, 3), rng.randint(0, 1000))
        now = NOW + datetime.timedelta(seconds=rng.choice([0, 0, 30]))
        verb = rng.choice([Verb.FILTER, Verb.PRIORITIZE, Verb.EXPLAIN])
        nodes = cluster.candidates()
        namespace = random_namespace(random.Random(pod["metadata"]["namespace"] + str(book.generation)), pod)
        estimate = random_estimate(random.Random(f"{pod['metadata'].get('labels')}{call // 7}"))
        asked = Call(pod, nodes, verb, now, namespace=namespace, estimate=estimate)
        fast = evaluate(prepared(book), asked)
        plain = reference.evaluate(book, asked)
        if rng.random() < 0.5:  # as the extender answers filter: the outcome first, then rejections are counted
            assert fast.outcome() == plain.outcome(), f"seed {seed}, call {call}"
        assert fast.as_dict() == plain.as_dict(), f"seed {seed}, call {call}"
        assert fast.failures() == plain.failures(), f"seed {seed}, call {call}: rejections counted differently"
    return calls


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize("seed", range(20))
def test_fast_path_decides_as_the_reference(tmp_path: Path, engine_name: EngineName, seed: int) -> None:
    calls = 60 if engine_name == "cpp" else 20
    assert run_calls(tmp_path, engine_named(engine_name), seed, calls) == calls


@pytest.mark.parametrize(("engine_name", "seed"), [("cpp", seed) for seed in range(100, 108)] + [("celpy", 100)])
def test_fast_path_decides_as_the_reference_over_many_nodes(tmp_path: Path, engine_name: EngineName, seed: int) -> None:
    """Enough nodes that a per-pod rule reading per-node values sees many groups of alike nodes, and is
    bound to the pod instead of run with the pod's values added to each group's bindings."""
    assert run_calls(tmp_path, engine_named(engine_name), seed, 15, size=60) == 15


def test_repeated_node_names_are_evaluated_once_as_by_the_reference(tmp_path: Path) -> None:
    engine = engine_named("cpp")
    book = load(tmp_path, engine, random_rule_sets(random.Random(3)), 1)
    node = node_context(random_node(random.Random(1), 1, 7), None, now=NOW)
    other = node_context(random_node(random.Random(1), 2, 7), None, now=NOW)
    pod = workload_pod(random.Random(2), 1, 1)
    fast = evaluate(prepared(book), Call(pod, [node, other, node], now=NOW))
    assert fast.as_dict() == reference.evaluate(book, Call(pod, [node, other, node], now=NOW)).as_dict()
    assert fast.as_dict() == evaluate(prepared(book), Call(pod, [node, other], now=NOW)).as_dict()


LABELS = ("metadata", "labels")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("pod.metadata.namespace != 'x'", {"pod": {("metadata", "namespace")}}),
        ("has(node.metadata.labels) && 'a' in node.metadata.labels", {"node": {(*LABELS, PRESENT), (*LABELS, "a")}}),
        ("node.metadata.labels['a'] == 'b'", {"node": {(*LABELS, "a")}}),
        ("!('a' in node.metadata.labels)", {"node": {(*LABELS, "a")}}),
        ("('x' + 'a') in node.metadata.labels", {"node": {LABELS}}),
        ("'a' in node.metadata.labels['b']", {"node": {(*LABELS, "b")}}),
        ("'a' in node.metadata.labels + m", {"node": {LABELS}}),
        ("node.metadata.labels[r'a']", {"node": {LABELS}}),
        ("has(node.spec.taints)", {"node": {("spec", "taints", PRESENT)}}),
        ("has(node) && has(metrics) && has(node.spec)", {"node": {("spec", PRESENT)}}),
        ("node.status.conditions.exists(c, c.ready)", {"node": {("status", "conditions")}}),
        ("node.metadata.size() > 0", {"node": {("metadata",)}}),
        ("size(pod) > 1", {"pod": {()}}),
        ("pod['spec'].x", {"pod": {("spec",)}}),
        ("x.pod.y + 'node.a'", {}),
        ("requests.cpu < allocatable . cpu", {"requests": {("cpu",)}, "allocatable": {("cpu",)}}),
    ],
)
def test_paths_finds_the_fields_an_expression_selects(source: str, expected: dict[str, set[tuple[str, ...]]]) -> None:
    assert paths(source) == {name: frozenset(found) for name, found in expected.items()}


def test_trim_keeps_exactly_what_the_paths_reach() -> None:
    node = {"metadata": {"name": "a", "labels": {"x": "1"}}, "status": {"conditions": [{"type": "Ready"}]}}
    assert trim(node, [("metadata", "labels"), ("status", "conditions", "exists")]) == {
        "metadata": {"labels": {"x": "1"}},
        "status": {"conditions": [{"type": "Ready"}]},
    }
    assert trim(node, [("spec", "taints")]) == {}
    assert trim(node, [()]) is node
