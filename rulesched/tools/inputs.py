"""The files the tools read: a pod, a node list and a metrics list, as JSON or YAML.

`decide` is the server's evaluation, step for step: node contexts built by `NodeContexts` from the
node objects and the metrics source, then `evaluate` over them (filters, then scores over the nodes
that pass). Explain and `rulesched test` both go through it, so they show what the scheduler gets.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.pods.index import FilePodSource, NamespaceSource, PodSource
from rulesched.cluster.pods.namespaces import FileNamespaceSource
from rulesched.cluster.sources import FileMetricsSource, MetricsSource, SourceError, read_document
from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call
from rulesched.rules.book import RuleBook
from rulesched.rules.pod_values import namespace_name


class InputError(Exception):
    """A pod, node or metrics file that cannot be used; the message names the file and the problem."""


def _parse_text(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InputError(f"{where}: not valid JSON or YAML: {error}") from error


def _document(path: Path) -> Any:
    try:
        return read_document(path)
    except SourceError as error:
        raise InputError(str(error)) from error


def read_pod(path: Path | str) -> Mapping[str, Any]:
    """A Pod from a JSON or YAML file, or from standard input when `path` is `-`."""
    pod = _parse_text(sys.stdin.read(), "<stdin>") if str(path) == "-" else _document(Path(path))
    if not isinstance(pod, Mapping) or not isinstance(pod.get("metadata"), Mapping):
        raise InputError(f"{path}: want a Pod (an object with metadata)")
    return pod


def read_nodes(path: Path) -> list[Mapping[str, Any]]:
    """The nodes of a NodeList file (a single Node object is accepted too)."""
    document = _document(path)
    if isinstance(document, Mapping) and document.get("kind") == "Node":
        return [document]
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise InputError(f"{path}: want a NodeList (an object with an 'items' list)")
    unnamed = [i for i, node in enumerate(items) if not (node.get("metadata") or {}).get("name")]
    if unnamed:
        raise InputError(f"{path}: items[{unnamed[0]}] has no metadata.name")
    return items


def read_metrics(path: Path | None) -> MetricsSource | None:
    """A metrics source from a NodeMetricsList file, or none."""
    if path is None:
        return None
    try:
        return FileMetricsSource(path)
    except SourceError as error:
        raise InputError(str(error)) from error


def read_pods(path: Path | None) -> PodSource | None:
    """A pod source from a PodList file, or none."""
    if path is None:
        return None
    try:
        return FilePodSource(path)
    except SourceError as error:
        raise InputError(str(error)) from error


def read_namespaces(path: Path | None) -> NamespaceSource | None:
    """A namespace source from a NamespaceList file, or none."""
    if path is None:
        return None
    try:
        return FileNamespaceSource(path)
    except SourceError as error:
        raise InputError(str(error)) from error


class Sources(NamedTuple):
    """The cluster context around the nodes, read from files or a snapshot (None: not given)."""

    metrics: MetricsSource | None = None
    pods: PodSource | None = None
    """The pods on each node."""
    namespaces: NamespaceSource | None = None


class SourceFiles(NamedTuple):
    """The files the `Sources` are read from (None: not given)."""

    metrics: Path | None = None
    pods: Path | None = None
    namespaces: Path | None = None

    def read(self) -> Sources:
        return Sources(read_metrics(self.metrics), read_pods(self.pods), read_namespaces(self.namespaces))


def decide(
    book: RuleBook,
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    sources: Sources,
    now: datetime.datetime | None = None,
    estimate: Mapping[str, float] | None = None,
) -> Decision:
    """The server's decision for `pod` over `nodes` (full mode: the nodes as the request carries them),
    with the pods on each node and the pod's namespace when their sources are given, and the pod's
    `estimate` (None: the fallback, its requests)."""
    contexts = file_contexts(sources.metrics, sources.pods).for_objects(nodes)
    namespace = namespace_of(pod, sources.namespaces)
    call = Call(pod, contexts, now=now, namespace=namespace, estimate=estimate)
    return evaluate(prepared(book), call)


def file_contexts(metrics: MetricsSource | None, pods: PodSource | None) -> NodeContexts:
    """Node contexts over file sources: the metrics file gives `metrics` and `metrics.custom` (its items'
    `custom` values stand in for the MetricSources' Prometheus queries, which the tools never poll)."""
    custom = metrics.custom if isinstance(metrics, FileMetricsSource) else None
    return NodeContexts(None, metrics, pods, custom)


def namespace_of(pod: Mapping[str, Any], namespaces: NamespaceSource | None) -> Mapping[str, Any] | None:
    """The pod's Namespace from `namespaces` (None when unknown)."""
    return namespaces.get(namespace_name(pod)) if namespaces is not None else None
