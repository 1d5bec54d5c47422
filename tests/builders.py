"""Builders for the objects rule tests need: pods, nodes, node contexts, rule files on disk.

Every builder returns plain JSON-like data shaped exactly as kube-scheduler sends it, so that a test
states only what matters to it (`make_pod(requests={"cpu": "250m"})`) and the rest is a valid default.
"""

from __future__ import annotations

import datetime
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import Engine
from rulesched.rules.context import NodeContext, NodeUsage, node_context
from rulesched.rules.loader import load_rule_book

NOW = datetime.datetime(2026, 11, 22, 1, 0, 0, tzinfo=datetime.UTC)
"""The request time every test uses, so that `now` and `metrics.age` are reproducible."""

Resources = Mapping[str, str | int | float]


def make_container(
    name: str = "app", requests: Resources | None = None, restart_policy: str | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "registry.example/app:1"}
    if requests is not None:
        container["resources"] = {"requests": dict(requests)}
    if restart_policy is not None:
        container["restartPolicy"] = restart_policy
    return container


def make_pod(
    name: str = "web-0",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    requests: Resources | Sequence[Resources] | None = None,
    init_containers: Sequence[Mapping[str, Any]] = (),
    overhead: Resources | None = None,
) -> dict[str, Any]:
    """A pod; `requests` is one container's requests, or a list with one entry per container."""
    per_container = [requests] if requests is None or isinstance(requests, Mapping) else list(requests)
    spec: dict[str, Any] = {
        "containers": [make_container(f"app-{i}", r) for i, r in enumerate(per_container)],
    }
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    if labels is not None:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def make_node(
    name: str = "node-a",
    labels: Mapping[str, str] | None = None,
    allocatable: Resources | None = None,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A node; without `labels` it has no `metadata.labels` at all, as the API server sends it."""
    metadata: dict[str, Any] = {"name": name, "resourceVersion": resource_version}
    if labels is not None:
        metadata["labels"] = dict(labels)
    resources = dict(allocatable) if allocatable is not None else {"cpu": "2", "memory": "4Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "status": {"capacity": resources, "allocatable": resources},
    }


def make_usage(cpu: float | None = None, memory: float | None = None, age: float | None = None) -> NodeUsage:
    """A metrics sample: CPU in cores, memory in bytes, taken `age` seconds before NOW."""
    taken = NOW - datetime.timedelta(seconds=age) if age is not None else None
    return NodeUsage(cpu=cpu, memory=memory, timestamp=taken)


def make_context(node: Mapping[str, Any], usage: NodeUsage | None = None) -> NodeContext:
    return node_context(node, usage, now=NOW)


def write_rules(directory: Path, yaml_text: str, name: str = "rules.yaml") -> Path:
    """Write a rule file (dedented) into `directory` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(yaml_text).lstrip("\n"), encoding="utf-8")
    return path


def rule_set(name: str, spec: str) -> str:
    """A RuleSet document named `name` whose spec is the (dedented) YAML `spec`."""
    body = textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ")
    return f"apiVersion: rulesched.io/v1alpha1\nkind: RuleSet\nmetadata:\n  name: {name}\nspec:\n{body}\n"


def load_spec(tmp_path: Path, engine: Engine, spec: str, name: str = "test") -> RuleBook:
    """A rule book holding one rule set named `name` with the given spec."""
    write_rules(tmp_path / "rules", rule_set(name, spec))
    return load_rule_book([tmp_path / "rules"], engine)


def decide(book: RuleBook, pod: Mapping[str, Any], nodes: Sequence[NodeContext], verb: Verb = Verb.EXPLAIN) -> Decision:
    return evaluate(prepared(book), Call(pod, nodes, verb, NOW))
