"""Where nodes and metrics come from: the interfaces, and the offline (file) sources.

A live source (the node cache, metrics-server) and a file source look the same to the extender.
Sources are read on the request path, so `get` and `usage` never block; only `fetch` may, and the
extender calls it off the event loop.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml

from rulesched.cluster.metrics.custom import CustomValues, file_values
from rulesched.rules.context import NodeUsage, node_name
from rulesched.rules.quantity import QuantityError, quantity_value


class SourceError(Exception):
    """A node or metrics file that cannot be used; the message names the file and the problem."""


class NodeSource(Protocol):
    def get(self, name: str) -> Mapping[str, Any] | None:
        """The node called `name` if known now; never blocks."""

    def fetch(self, name: str) -> Mapping[str, Any] | None:
        """Look harder for a node `get` did not know (a direct GET, bounded in time); may block."""

    def ready(self) -> bool:
        """True once the source has a complete view (the first list has completed)."""

    def size(self) -> int:
        """How many nodes the source knows."""

    def generation(self) -> int:
        """A number that grows whenever `get` may answer differently for some node; never blocks."""

    def changed_since(self, generation: int) -> set[str] | None:
        """The nodes `get` may answer differently for since `generation`; None when that is no longer
        known (every node may have changed)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class MetricsSource(Protocol):
    def usage(self, name: str) -> NodeUsage | None:
        """The node's latest usable sample, or None when unknown or stale; never blocks."""

    def generation(self) -> Hashable:
        """A value that changes whenever `usage` may answer differently for some node (a new poll,
        a sample growing too old); never blocks."""

    def newest_sample_age(self) -> float | None:
        """Seconds since the newest sample was taken (None when unknown), for monitoring."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Binder(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind the pod to the node; "" on success, else the API's reason. May block."""


def node_names(nodes: NodeSource) -> list[str]:
    """Every node the source knows (none for a source that cannot list them)."""
    names = getattr(nodes, "names", None)
    return list(names()) if callable(names) else []


def without_managed_fields(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The node without `metadata.managedFields`: server-side apply bookkeeping, often a third or more of
    a node's bytes, that no scheduling rule reads (kube-scheduler's informers drop it too)."""
    metadata = node.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return node


def read_document(path: Path) -> Any:
    """A JSON or YAML file's single document."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SourceError(f"{path}: cannot read: {error.strerror or error}") from error
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise SourceError(f"{path}: not valid JSON or YAML: {error}") from error


def items_of(path: Path, kind: str) -> list[Mapping[str, Any]]:
    """The `items` of a list file (NodeList, PodList, …); SourceError when it is not one."""
    document = read_document(path)
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise SourceError(f"{path}: want a {kind} (an object with an 'items' list)")
    return items


class NamedNodes:
    """What lists a node source's names (the descheduler looks for another node): its nodes by name."""

    _nodes: Mapping[str, Any]

    def names(self) -> list[str]:
        return list(self._nodes)


class FileNodeSource(NamedNodes):
    """Nodes from a NodeList file: the offline node source for names mode."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._nodes = {node_name(n): without_managed_fields(n) for n in items_of(path, "NodeList")}
        if "" in self._nodes:
            raise SourceError(f"{path}: every node needs metadata.name")

    def get(self, name: str) -> Mapping[str, Any] | None:
        return self._nodes.get(name)

    def fetch(self, name: str) -> Mapping[str, Any] | None:
        return self._nodes.get(name)

    def ready(self) -> bool:
        return True

    def size(self) -> int:
        return len(self._nodes)

    def generation(self) -> int:
        return 0  # a file is read once

    def changed_since(self, generation: int) -> set[str] | None:
        return set()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def parse_timestamp(value: object) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _number(value: object) -> float | None:
    try:
        return quantity_value(value) if value is not None else None
    except QuantityError:
        return None


def node_usage(item: Mapping[str, Any]) -> NodeUsage:
    """A NodeMetrics item (`usage.cpu`, `usage.memory`, `timestamp`) as numbers."""
    usage = item.get("usage") if isinstance(item.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    return NodeUsage(
        cpu=_number(usage.get("cpu")),
        memory=_number(usage.get("memory")),
        timestamp=parse_timestamp(item.get("timestamp")),
    )


class FileMetricsSource:
    """Metrics from a NodeMetricsList file, taken as current: its timestamps are reported, not expired."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._usage: dict[str, NodeUsage] = {}
        items = items_of(path, "NodeMetricsList")
        self.custom: CustomValues | None = file_values(items)
        """The items' custom values (`custom: {cpu5m: 0.42}`), for `metrics.custom`; None when none has any."""
        for item in items:
            name = node_name(item)
            if name:
                sample = node_usage(item)
                # Taken as current: age 0 at load, so the shipped snapshot never goes stale.
                self._usage[name] = NodeUsage(sample.cpu, sample.memory, None)

    def usage(self, name: str) -> NodeUsage | None:
        return self._usage.get(name)

    def generation(self) -> Hashable:
        return 0  # a file is read once, and its samples never age

    def newest_sample_age(self) -> float | None:
        return None  # a file is taken as current: it has no age

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass
