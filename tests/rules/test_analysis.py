"""What an expression reads, checked where it matters: evaluated on values trimmed to the paths found.

The caches key and trim on the field paths `analysis.paths` reports, so a path it fails to report is a
wrong cached answer. Each expression here is evaluated, on both engines, once with the whole node and
pod and once with each value trimmed (`plan.trim`) to its reported paths; every answer must be the same.
An analysis that under-reports (forgets a selection, narrows to the wrong key, misses a name inside a
comprehension or a ternary) gives a different answer on some of the random values.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from rulesched.decide.fast.keys import trim
from rulesched.rules.cel import CelEvalError, Engine
from rulesched.rules.cel.analysis import PRESENT, paths, paths_of, reads
from rulesched.rules.vocabulary import CONTEXT_NAMES

KEYS = ("zone", "tier", "filter.xy.com", "gpu")

EXPRESSIONS = [
    "has(node.metadata.labels) && 'zone' in node.metadata.labels",
    "'zone' in node.metadata.labels ? node.metadata.labels['zone'] : 'none'",
    "node.metadata.labels['tier'] == 'gold'",
    "!('gpu' in node.metadata.labels) || node.metadata.labels.gpu == 'true'",
    "has(node.metadata.labels.zone) && node.metadata.labels.zone == pod.metadata.labels.zone",
    "node.metadata.labels.exists(k, k.startsWith('t'))",
    "size(node.metadata.labels) > 2",
    "node.metadata.labels.filter(k, k != 'zone').size()",
    "node.metadata.labels.map(k, node.metadata.labels[k]).size()",
    "[node.metadata.labels].exists(m, 'tier' in m)",
    "{'l': node.metadata.labels}.l.tier",
    "(node.metadata.labels).zone",
    "'a' in node.metadata.labels.zone",
    "node.metadata.labels.zone + 'x'",
    "node.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
    "node.status.conditions.filter(c, c.status == 'True').map(c, c.type)",
    "has(node.spec.taints) ? node.spec.taints.size() : 0",
    "has(node.spec) && has(node.spec.taints)",
    "node.metadata.name + '/' + pod.metadata.name",
    "pod.spec.containers.exists(c, c.name == 'web') && pod.metadata.namespace != 'kube-system'",
    "pod.metadata.labels.all(k, k in node.metadata.labels && node.metadata.labels[k] == pod.metadata.labels[k])",
    "node.metadata.labels[pod.metadata.labels.key] == 'x'",
    "[1, 2].map(node, node + 1).size() + size(node)",
    "pod.spec.containers.map(node, node.name).exists(n, n in node.metadata.labels)",
    "node.metadata.labels.zone in ['a', 'b'] ? 1 : node.metadata.labels.tier in ['gold'] ? 2 : 3",
    "int(size(node.status.conditions)) * 2 - (has(node.metadata.labels) ? 1 : 0)",
]
METRICS_EXPRESSIONS = [
    "!has(metrics.custom) || !has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.5",
    "has(metrics.custom) ? metrics.custom.size() : -1",
    "has(metrics.custom.cpu5m) ? metrics.custom.cpu5m : -1.0",
    "metrics.?custom.?cpu5m.orValue(0.0)",
    "metrics.custom.?cpu5m.hasValue()",
    "metrics.?custom.orValue({}).size()",
    "metrics.custom[?'cpu5m'].orValue(-1.0)",
    "metrics.custom['cpu5m'] < 0.5",
    "'cpu5m' in metrics.custom && !('mem' in metrics.custom)",
    "metrics.custom.exists(k, metrics.custom[k] > 0.5)",
    "metrics.custom.all(k, v, v < 0.5)",
    "metrics.custom.filter(k, k != 'cpu5m').size()",
    "cel.bind(c, metrics.custom, has(c.cpu5m) && c.cpu5m > 0.5)",
    "cel.bind(m, metrics, has(m.custom) && m.custom.exists(k, has(m.custom.cpu5m)))",
    "[metrics.custom].exists(c, 'mem' in c)",
    "has(metrics.cpu) && has(metrics.custom.mem)",
    "[1].exists(x, has(metrics.custom) && has(node.metadata.labels))",
]
"""Reads of `metrics.custom` behind each kind of guard, of its presence, of an optional selection, an index,
a comprehension over it and macros in `cel.bind`."""
CPP_ONLY = [
    "node.?metadata.?labels.?zone.orValue('none')",
    "node.metadata.labels[?'tier'].orValue('none')",
    "cel.bind(l, node.metadata.labels, 'zone' in l && l.zone == 'a')",
]


def random_node(rng: random.Random) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"n-{rng.randrange(100)}"}
    if rng.random() < 0.85:
        metadata["labels"] = {k: rng.choice(["a", "b", "gold", "true"]) for k in KEYS if rng.random() < 0.6}
        if rng.random() < 0.3:
            metadata["labels"]["key"] = "x"
    node: dict[str, Any] = {"metadata": metadata, "status": {"conditions": []}}
    for kind in ("Ready", "MemoryPressure"):
        if rng.random() < 0.8:
            node["status"]["conditions"].append({"type": kind, "status": rng.choice(["True", "False"])})
    if rng.random() < 0.5:
        node["spec"] = {"taints": [{"key": "k"}] * rng.randrange(3)} if rng.random() < 0.7 else {}
    return node


def random_metrics(rng: random.Random) -> dict[str, Any]:
    """A `metrics` value: `custom` with some of its values, or (not in a node's context, but a map the
    expressions may meet) without `custom` at all."""
    metrics: dict[str, Any] = {"cpu": {"usage": rng.random()}} if rng.random() < 0.5 else {}
    if rng.random() < 0.85:
        metrics["custom"] = {k: rng.choice([0.2, 0.7]) for k in ("cpu5m", "mem") if rng.random() < 0.6}
    return metrics


def random_pod(rng: random.Random) -> dict[str, Any]:
    labels = {k: rng.choice(["a", "b", "gold"]) for k in KEYS if rng.random() < 0.5}
    if rng.random() < 0.5:
        labels["key"] = rng.choice(KEYS)
    containers = [{"name": rng.choice(["web", "db"])} for _ in range(rng.randrange(1, 3))]
    namespace = rng.choice(["default", "kube-system"])
    return {"metadata": {"name": "p", "namespace": namespace, "labels": labels}, "spec": {"containers": containers}}


def evaluate(engine: Engine, source: str, context: dict[str, Any]) -> Any:
    program = engine.compile(source)
    try:
        return program.evaluate(engine.bindings({n: engine.convert(v) for n, v in context.items()}))
    except CelEvalError:
        return "error"


def trimmed(source: str, context: dict[str, Any]) -> dict[str, Any]:
    """`context` with each value cut down to the paths `source` is said to read (absent if none)."""
    found = paths(source)
    return {name: trim(value, found[name]) for name, value in context.items() if name in found}


def expressions_for(engine: Engine) -> list[str]:
    return EXPRESSIONS + METRICS_EXPRESSIONS + (CPP_ONLY if engine.name == "cpp" else [])


def test_the_paths_found_are_enough_to_evaluate_every_expression(engine: Engine) -> None:
    rng = random.Random(17)
    contexts = [{"node": random_node(rng), "pod": random_pod(rng), "metrics": random_metrics(rng)} for _ in range(40)]
    wrong = []
    for source in expressions_for(engine):
        for context in contexts:
            whole, cut = evaluate(engine, source, context), evaluate(engine, source, trimmed(source, context))
            if whole != cut:
                wrong.append((source, context, whole, cut))
                break
    assert wrong == []


def test_the_check_above_catches_an_under_report(engine: Engine) -> None:
    """A path one step short of the truth (labels' 'zone' read as 'tier') changes answers."""
    source = "'zone' in node.metadata.labels"
    rng = random.Random(17)
    contexts = [{"node": random_node(rng)} for _ in range(40)]
    wrong_cut = [{"node": trim(c["node"], [("metadata", "labels", "tier")])} for c in contexts]
    assert any(
        evaluate(engine, source, c) != evaluate(engine, source, w) for c, w in zip(contexts, wrong_cut, strict=True)
    )


@pytest.mark.parametrize(
    ("source", "names", "variables"),
    [
        ("variables.a + variables['b'] > variables.a", {"variables"}, ("a", "b")),
        ("pod.metadata.name + node.metadata.name", {"pod", "node"}, ()),
        ("x.pod + 'node'", set(), ()),
        (".pod.metadata.name", {"pod"}, ()),
        ("pod.spec.containers.exists(now, now.name == 'a')", {"pod", "now"}, ()),
        ("metrics.cpu.usage < allocatable.cpu * 0.8 && requests.cpu > 0.0", {"metrics", "allocatable", "requests"}, ()),
    ],
)
def test_reads_finds_every_context_name_and_variable(source: str, names: set[str], variables: tuple[str, ...]) -> None:
    assert reads(source).names == names
    assert reads(source).variables == variables


def test_an_expression_that_does_not_parse_reads_everything_whole() -> None:
    assert reads("node.metadata.labels[").names == frozenset(CONTEXT_NAMES)
    assert paths("node.metadata.labels[") == {name: frozenset({()}) for name in CONTEXT_NAMES}


def test_paths_of_several_expressions_is_their_union() -> None:
    assert paths_of(["has(node.spec.taints)", "", "node.metadata.name"]) == {
        "node": frozenset({("spec", "taints", PRESENT), ("metadata", "name")})
    }
