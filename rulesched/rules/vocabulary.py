"""Every name a rule can read, declared once: its CEL type, the side it lives on, its cost shape, whether
match conditions may read it, how it is read off a pod request or a node context, and how caches key on it.

Everything else that knows the names derives from this table: both CEL engines' declarations
(`cel/cpp.py`), the load-time type check (`cel/typecheck.py`: each name's `typed`, the fields of `RECORDS`),
what an expression reads (`cel/analysis.py`), the cost estimate's inputs (`cel/cost.py`),
the match conditions' check (`book.py`), the fast path's classification, memo values, pod keys and node
projections (`plan.py`), the reference evaluation's values (`reference.py`), lint (`tools/lint.py`) and
the table of names in docs/rules/language.md (a test compares it). A new name is one entry here
(docs/architecture.md, "Add a context name").
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, NamedTuple

from rulesched.rules.cel import types
from rulesched.rules.cel.shape import (
    ANY,
    LABELS,
    LIST_DEFAULT,
    METADATA,
    NUMBERS,
    PODS_PER_NODE,
    SCALAR,
    VIEW_ANNOTATION_CHARS,
    Shape,
    mapping,
    record,
    string,
)
from rulesched.rules.context import NodeContext
from rulesched.rules.estimate import estimate_or_fallback
from rulesched.rules.pod_values import namespace_view, pod_requests


class Side(enum.Enum):
    """Where a name's value comes from, and so what a change of it invalidates."""

    REQUEST = "request"
    """The pod or the request (the pod, its namespace, the time): per pod, keyed by what a rule reads of it."""
    NODE = "node"
    """The node object: changes with the node's version."""
    SAMPLE = "sample"
    """The node's metrics sample: changes with each poll (`Change.SAMPLE`)."""
    NODE_PODS = "node's pods"
    """The pods on the node: changes with a pod event on it (`Change.PODS`)."""
    DERIVED = "derived"
    """Computed from the others by the rule set (`variables`)."""


NODE_SIDES = frozenset({Side.NODE, Side.SAMPLE, Side.NODE_PODS})
"""The sides whose values differ from node to node."""


class Key(enum.Enum):
    """How the fast path's caches key on a name a rule reads."""

    PROJECTED = "projected"
    """On the fields the rule reads of it (`plan.trim`): pods or nodes alike there share results."""
    WHOLE = "whole"
    """On the whole value."""
    TIME = "time"
    """On the time, beside the pod's key, only for the rules that read it (`now`)."""
    NONE = "none"
    """Not at all: derived from names that are keyed."""


CelType = Literal["dyn", "numbers", "timestamp"]
"""A name's declared CEL type: `numbers` is a map of resource names to numbers (declared dyn: see `cel/cpp.py`)."""
NodeReader = Callable[[NodeContext], object]
"""How a node-side value is read off a node context."""


class RequestInputs(NamedTuple):
    """What a request-side value is read off: the pod, its Namespace object (None: not known), the time, and
    the pod's usage estimate (None: the default fallback, its requests)."""

    pod: Mapping[str, Any]
    namespace: Mapping[str, Any] | None
    now: datetime.datetime
    estimate: Mapping[str, float] | None = None


RequestReader = Callable[[RequestInputs], object]
"""How a request-side value is read off what the call asks."""


@dataclass(frozen=True, slots=True)
class Name:
    """One name a rule can read."""

    name: str
    cel_type: CelType
    side: Side
    shape: Shape
    """The largest value the cost estimate assumes (docs/rules/cost.md)."""
    doc_type: str
    """Its type in the docs' table of names (map, list, timestamp) when `typed` is dyn."""
    summary: str
    """What it holds, as the docs' table of names says."""
    typed: str = "dyn"
    """Its type for the load-time type check (`cel/types.py`): a Kubernetes model (`V1Pod`), a record of
    `RECORDS`, `map(double)`, `list(PodView)`, `timestamp`."""
    key: Key = Key.PROJECTED
    trimmed: bool = False
    """Converted for the engine trimmed to the fields the rule book reads of it (a pod, a node: large objects)."""
    in_match_conditions: bool = False
    """Match conditions may read it (they choose rule sets per pod: request-side names only)."""
    read_node: NodeReader | None = None
    read_request: RequestReader | None = None


def _listed(value: Sequence[Mapping[str, Any]]) -> object:
    """A node's pods as the engines take them: a list (a tuple is not converted)."""
    return list(value) if isinstance(value, tuple) else value


_LABELS = "map(string)"
RECORDS: Mapping[str, Mapping[str, str]] = {
    "Metrics": {"cpu": "Usage", "memory": "Usage", "age": "double", "custom": "map(double)"},
    "Usage": {"usage": "double", "utilization": "double"},
    "Recent": {"count": "double", "requests": "map(double)", "estimates": "map(double)"},
    "PodView": {"metadata": "PodViewMetadata", "spec": "PodViewSpec", "requests": "map(double)"},
    "PodViewMetadata": {
        "name": "string", "namespace": "string", "uid": "string", "labels": _LABELS, "annotations": _LABELS,
        "ownerReferences": "list(PodViewOwner)", "creationTimestamp": "string",
    },
    "PodViewOwner": {"apiVersion": "string", "kind": "string", "name": "string", "uid": "string", "controller": "bool"},
    "PodViewSpec": {"nodeName": "string", "priority": "int", "priorityClassName": "string", "schedulerName": "string"},
    "NamespaceView": {"metadata": "NamespaceViewMetadata"},
    "NamespaceViewMetadata": {"name": "string", "labels": _LABELS, "annotations": _LABELS},
}  # fmt: skip
"""The records of rulesched's own values (`metrics`, `recent`, the views of `pods` and `namespaceObject`): each
field's type, as `Name.typed` writes types; `metrics.custom`'s keys are the MetricSources' query names."""
types.declare_records(RECORDS)

NAMES: tuple[Name, ...] = (
    Name(
        "pod", "dyn", Side.REQUEST, record(metadata=METADATA), "map", "the Pod exactly as kube-scheduler sent it",
        typed="V1Pod", trimmed=True, in_match_conditions=True, read_request=lambda inputs: inputs.pod,
    ),
    Name(
        "node", "dyn", Side.NODE,
        # kubelet reports at most 50 images (nodeStatusMaxImages)
        record(metadata=METADATA, status=record(images=Shape(size=50, item=ANY))),
        "map",
        "the Node (from the request in full mode, from the node source in names mode; a cached node has no "
        "`metadata.managedFields`)",
        typed="V1Node", trimmed=True, read_node=lambda context: context.node,
    ),
    Name(
        # A map (`'cpu' in metrics` is a lookup) whose `custom` is a map of numbers, as `allocatable` is.
        "metrics", "dyn", Side.SAMPLE,
        Shape(size=LIST_DEFAULT, item=record(), fields={"custom": NUMBERS}, mapping=True),
        "map",
        "live usage, numbers only: `metrics.cpu.usage` (cores), `metrics.cpu.utilization` (usage ÷ allocatable), "
        "`metrics.memory.usage` (bytes), `metrics.memory.utilization`, `metrics.age` (seconds between the sample "
        "and its arrival). Keys are absent when unknown or stale: test with `has(metrics.cpu)`",
        typed="Metrics", read_node=lambda context: context.metrics,
    ),
    Name(
        "allocatable", "numbers", Side.NODE, NUMBERS, "map",
        "the node's allocatable resources as doubles (`cpu` in cores, `memory` in bytes, `pods`, extended "
        "resources such as `allocatable['nvidia.com/gpu']`)",
        typed="map(double)", read_node=lambda context: context.allocatable,
    ),
    Name(
        "requests", "numbers", Side.REQUEST, NUMBERS, "map",
        "the pod's effective requests as doubles, as kube-scheduler computes them (containers summed, the maximum "
        "with each init container, restartable init containers added, plus overhead)",
        typed="map(double)", key=Key.WHOLE, read_request=lambda inputs: pod_requests(inputs.pod),
    ),
    Name("variables", "dyn", Side.DERIVED, ANY, "map", "the rule set's variables", key=Key.NONE),
    Name(
        "now", "timestamp", Side.REQUEST, SCALAR, "timestamp", "the time of the request",
        typed="timestamp", key=Key.TIME, in_match_conditions=True, read_request=lambda inputs: inputs.now,
    ),
    Name(
        "allocated", "numbers", Side.NODE_PODS, NUMBERS, "map",
        "the sum of the effective requests of the non-terminal pods on the node (the NodeResourcesFit view); "
        "`cpu`, `memory`, `pods` always present (0 when empty). See [cluster context](cluster-context.md)",
        typed="map(double)", read_node=lambda context: context.pods.allocated,
    ),
    Name(
        "pods", "dyn", Side.NODE_PODS,
        Shape(
            size=PODS_PER_NODE,
            item=record(
                metadata=record(
                    name=string(253), namespace=string(63), uid=string(36), labels=LABELS,
                    annotations=mapping(string(VIEW_ANNOTATION_CHARS)),
                ),
                requests=NUMBERS,
            ),
        ),
        "list",
        "the non-terminal pods on the node, trimmed: `metadata` (name, namespace, uid, labels, annotations, "
        "ownerReferences, creationTimestamp), `spec` (nodeName, priority, priorityClassName, schedulerName), "
        "`requests`",
        typed="list(PodView)", read_node=lambda context: _listed(context.pods.pods),
    ),
    Name(
        "recent", "dyn", Side.NODE_PODS, record(count=SCALAR, requests=NUMBERS, estimates=NUMBERS), "map",
        "`count`, `requests` and `estimates` (what they will use: [usage estimates](../guides/usage-estimates.md)) "
        "of the pods placed on the node after its metrics sample, including those this extender chose and the "
        "watch has not confirmed yet: `metrics.cpu.usage + recent.estimates.cpu` is the burst-aware estimate",
        typed="Recent", read_node=lambda context: context.pods.recent,
    ),
    Name(
        "estimate", "numbers", Side.REQUEST, NUMBERS, "map of doubles",
        "what the pod will use: `cpu` (cores), `memory` (bytes), from the usage of its workload's pods, and "
        "`samples` (the polls it comes from; 0: the fallback, by default its `requests`) "
        "([usage estimates](../guides/usage-estimates.md))",
        typed="map(double)", key=Key.WHOLE,
        read_request=lambda inputs: dict(estimate_or_fallback(inputs.estimate, inputs.pod)),
    ),
    Name(
        "namespaceObject", "dyn", Side.REQUEST,
        record(metadata=record(name=string(63), labels=LABELS, annotations=mapping(string(VIEW_ANNOTATION_CHARS)))),
        "map", "the pod's Namespace (`metadata.name`, `labels`, `annotations`); also in matchConditions",
        typed="NamespaceView", trimmed=True, in_match_conditions=True,
        read_request=lambda inputs: namespace_view(inputs.pod, inputs.namespace),
    ),
)  # fmt: skip
"""Every name a rule can read, in the order the docs list them."""

BY_NAME: Mapping[str, Name] = {entry.name: entry for entry in NAMES}
CONTEXT_NAMES: tuple[str, ...] = tuple(BY_NAME)
"""Every name an expression may read."""
PER_POD = frozenset(entry.name for entry in NAMES if entry.side is Side.REQUEST)
"""Names whose values change with the pod or the request: a rule reading one is evaluated per pod."""
NODE_SIDE: tuple[Name, ...] = tuple(entry for entry in NAMES if entry.side in NODE_SIDES)
"""Names whose values differ from node to node, read off each node's context."""
NODE_DATA = frozenset(entry.name for entry in NODE_SIDE)
SAMPLE = frozenset(entry.name for entry in NAMES if entry.side is Side.SAMPLE)
"""Names that change with a node's metrics sample."""
NODE_PODS: tuple[str, ...] = tuple(entry.name for entry in NAMES if entry.side is Side.NODE_PODS)
"""Names that change with the pods on a node."""
TIME = frozenset(entry.name for entry in NAMES if entry.key is Key.TIME)
"""Names that change with the time alone: caches key on the time beside the pod for what reads them."""
MATCH_READS: tuple[str, ...] = tuple(entry.name for entry in NAMES if entry.in_match_conditions)
"""Names match conditions may read."""
DERIVED: tuple[str, ...] = tuple(entry.name for entry in NAMES if entry.side is Side.DERIVED)
"""Names the rule sets compute (`variables`): bound empty, each program computes its own."""


@cache
def context_types() -> Mapping[str, types.CelType]:
    """Every context name's type for the load-time type check (`variables`: typed per rule set by the check)."""
    return {entry.name: types.parse(entry.typed) for entry in NAMES if entry.name != "variables"}


def listed(names: Sequence[str]) -> str:
    """`a, b and c`: names as a message lists them."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def request_values(inputs: RequestInputs) -> dict[str, object]:
    """Every request-side name's value for the pod, untrimmed (the reference evaluation's)."""
    return {e.name: e.read_request(inputs) for e in NAMES if e.read_request is not None}


def node_values(context: NodeContext) -> dict[str, object]:
    """Every node-side name's value off the node's context, untrimmed (the reference evaluation's)."""
    return {e.name: e.read_node(context) for e in NODE_SIDE if e.read_node is not None}


def shown_type(entry: Name) -> str:
    """A name's type as the docs show it: the type the load-time check gives it, else `doc_type`."""
    return f"`{types.parse(entry.typed)}`" if entry.typed != "dyn" else entry.doc_type


def type_table() -> str:
    """Every name's type and the fields of the vocabulary's records, as docs/rules/cluster-context.md lists them."""
    names = [f"| `{e.name}` | {shown_type(e)} |" for e in NAMES]
    records = [
        f"| `{name}` | {', '.join(f'`{field}`: `{types.parse(text)}`' for field, text in fields.items())} |"
        for name, fields in RECORDS.items()
    ]
    return "\n".join(["| name | type |", "|---|---|", *names, "", "| type | fields |", "|---|---|", *records])


def doc_table() -> str:
    """The table of names in docs/rules/language.md."""
    rows = [f"| `{e.name}` | {shown_type(e)} | {e.summary} |" for e in NAMES]
    return "\n".join(["| name | type | what |", "|---|---|---|", *rows])
