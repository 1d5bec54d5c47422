"""The numbers rules read, computed once: a node's allocatable and live usage, a pod's requests.

A `NodeContext` is a frozen snapshot of one node (its object, allocatable resources and metrics);
it is rebuilt only when the node's resourceVersion or its metrics sample changes. Pod requests are
computed as kube-scheduler computes them (containers summed, the maximum with each init container,
restartable init containers added, plus overhead).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rulesched.rules.quantity import QuantityError, parse_quantity, quantity_value


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One metrics sample of a node: CPU in cores, memory in bytes, and when it was taken."""

    cpu: float | None
    memory: float | None
    timestamp: datetime.datetime | None = None


@dataclass(frozen=True, slots=True, eq=False)
class NodeContext:
    """What the rules see of one node. `key` changes whenever anything in it changes.

    Compared by identity: contexts are cache entries, and lists of them are searched on every request."""

    name: str
    node: Mapping[str, Any]
    allocatable: Mapping[str, float]
    metrics: Mapping[str, Any]
    key: tuple[Any, ...]
    cache: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """Engine-ready values derived from this snapshot, filled on first use."""
    memo: Any = field(default=None, compare=False, hash=False, repr=False)
    """The fast engine's memo of this snapshot for the current rule book (`rulesched.rules.plan.NodeMemo`),
    the one field set after construction: kept here rather than in `cache` so that reaching it from a
    candidate is one attribute read, for every candidate of every request."""


def resource_numbers(resources: object) -> dict[str, float]:
    """A resource list (`{"cpu": "250m", "memory": "1Gi"}`) as numbers; invalid entries are skipped."""
    if not isinstance(resources, Mapping):
        return {}
    numbers: dict[str, float] = {}
    for name, value in resources.items():
        try:
            numbers[str(name)] = quantity_value(value)
        except QuantityError:
            continue
    return numbers


def _dig(obj: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def node_name(node: Mapping[str, Any]) -> str:
    name = _dig(node, "metadata", "name")
    return name if isinstance(name, str) else ""


DEFAULT_NAMESPACE = "default"
"""A pod sent without a namespace is in "default", as the API server and kube-scheduler take it."""


def pod_identity(pod: Mapping[str, Any]) -> dict[str, str]:
    """The pod's namespace, name and uid as strings ("" when absent; the namespace defaults to "default")."""
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    identity = {key: str(metadata.get(key) or "") for key in ("namespace", "name", "uid")}
    identity["namespace"] = identity["namespace"] or DEFAULT_NAMESPACE
    return identity


def metrics_map(usage: NodeUsage | None, allocatable: Mapping[str, float], now: datetime.datetime) -> dict[str, Any]:
    """The `metrics` variable: keys present only for what is known."""
    if usage is None:
        return {}
    metrics: dict[str, Any] = {}
    for resource, value in (("cpu", usage.cpu), ("memory", usage.memory)):
        if value is None:
            continue
        entry = {"usage": float(value)}
        capacity = allocatable.get(resource, 0.0)
        if capacity > 0:
            entry["utilization"] = float(value) / capacity
        metrics[resource] = entry
    if usage.timestamp is not None:
        metrics["age"] = max(0.0, (now - usage.timestamp).total_seconds())
    return metrics


def allocatable_numbers(resources: object) -> Mapping[str, float]:
    """`resource_numbers` of a node's allocatable, shared by the nodes that have the same (an instance
    type's): parsing quantities is most of the cost of a context, which every new metrics sample rebuilds.
    The map is shared, so it must not be changed."""
    if not isinstance(resources, Mapping):
        return {}
    try:
        return _allocatable(tuple(resources.items()))
    except TypeError:  # an unhashable value: not a quantity anyway
        return resource_numbers(resources)


@functools.lru_cache(maxsize=1024)
def _allocatable(items: tuple[tuple[Any, Any], ...]) -> Mapping[str, float]:
    return resource_numbers(dict(items))


def node_context(node: Mapping[str, Any], usage: NodeUsage | None, now: datetime.datetime | None = None) -> NodeContext:
    """The context of `node` with its metrics sample (or none)."""
    allocatable = allocatable_numbers(_dig(node, "status", "allocatable"))
    metrics = metrics_map(usage, allocatable, now or datetime.datetime.now(datetime.UTC))
    version = _dig(node, "metadata", "resourceVersion")
    identity = (node_name(node), version if version else id(node), usage)
    return NodeContext(name=node_name(node), node=node, allocatable=allocatable, metrics=metrics, key=identity)


def _exact(resources: object) -> dict[str, Decimal]:
    """Like `resource_numbers`, but exact, so that sums are exact (100m + 200m is 0.3, not 0.30000000000000004)."""
    if not isinstance(resources, Mapping):
        return {}
    numbers: dict[str, Decimal] = {}
    for name, value in resources.items():
        try:
            numbers[str(name)] = _decimal(value)
        except QuantityError:
            continue
    return numbers


def _decimal(value: object) -> Decimal:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Decimal(value)
    if isinstance(value, str):
        return parse_quantity(value)
    raise QuantityError(f"invalid quantity {value!r}")


def _add(total: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Decimal(0)) + value


def _requests(container: object) -> dict[str, Decimal]:
    return _exact(_dig(container, "resources", "requests"))


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """The pod's effective requests, as kube-scheduler's resource helpers compute them.

    Containers are summed; restartable init containers (sidecars) run alongside them and are added;
    a regular init container runs with the sidecars started before it, and the pod needs at least the
    most any such step needs; overhead comes on top.
    """
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    total: dict[str, Decimal] = {}
    for container in _list(spec.get("containers")):
        _add(total, _requests(container))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in _list(spec.get("initContainers")):
        step = dict(_requests(container))
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            _add(total, step)
            _add(sidecars, step)
            step = dict(sidecars)
        else:
            _add(step, sidecars)
        for name, value in step.items():
            init_peak[name] = max(init_peak.get(name, Decimal(0)), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), value)
    _add(total, _exact(spec.get("overhead")))
    return {name: float(value) for name, value in total.items()}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
