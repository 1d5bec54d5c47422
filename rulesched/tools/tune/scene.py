"""The scenes `rulesched tune` places pods in: read from a recording, or from node, pod and metrics files.

From a recording (`serve --record`): the nodes its calls saw (each node's latest object), each node's use
at its first sample, the pods on it then, and each pod that was asked about, arriving when it was first
asked about, using what the server's usage estimate said at the time (the recorded `estimate`; its
requests when none was recorded). From files: the nodes of `--nodes`, their use in `--metrics`, the bound
pods of `--pods` on their nodes and its pods not bound yet arriving `gap` seconds apart, each using its
workload's measured usage when `--pod-metrics` has it, else its requests.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rulesched.cluster.sources import SourceError, read_document
from rulesched.cluster.usage.store import UsageStore, record_poll
from rulesched.rules.pod_values import pod_identity, pod_requests, pod_view
from rulesched.tools.inputs import InputError, read_metrics, read_nodes
from rulesched.tools.recording_read import Call
from rulesched.tools.tune.model import Arrival, Scene

MAX_ARRIVALS = 20_000
"""Most pods a scene places (the search's time and memory grow with them); later ones are left out."""


class SceneError(ValueError):
    """A scene that cannot be built; the message says what is missing."""


def _use(pod: Mapping[str, Any], estimate: Mapping[str, float] | None) -> tuple[float, float]:
    known = estimate if estimate is not None else pod_requests(pod)
    return float(known.get("cpu", 0.0)), float(known.get("memory", 0.0))


def from_calls(calls: Iterable[Call], interval: float, recent_seconds: float) -> Scene:
    """The scene of a recording's filter and prioritize calls."""
    nodes: dict[str, Mapping[str, Any]] = {}
    base: dict[str, tuple[float, float]] = {}
    residents: dict[str, tuple[Mapping[str, Any], str]] = {}
    first: dict[str, tuple[datetime.datetime, Call]] = {}
    for call in calls:
        if call.verb not in ("filter", "prioritize"):
            continue
        for context in call.contexts:
            nodes[context.name] = context.node
            if context.name not in base:
                base[context.name] = _sampled(context.metrics)
                for view in context.pods.pods:
                    residents.setdefault(_key(view), (view, context.name))
        identity = pod_identity(call.pod)
        key = f"{identity['namespace']}/{identity['name']}"
        if key not in first and len(first) < MAX_ARRIVALS:
            first[key] = (call.now, call)
    if not first:
        raise SceneError("the recording has no filter or prioritize call: no pod to place")
    start = min(now for now, _ in first.values())
    arrivals = []
    for now, call in first.values():
        cpu, memory = _use(call.pod, call.estimate)
        arrivals.append(Arrival((now - start).total_seconds(), call.pod, cpu, memory, call.estimate))
    arrived = {a.name for a in arrivals}
    kept = [(v, n) for k, (v, n) in residents.items() if k not in arrived]
    return Scene(list(nodes.values()), base, kept, arrivals, start, interval, recent_seconds)


def _sampled(metrics: Mapping[str, Any]) -> tuple[float, float]:
    cpu = (metrics.get("cpu") or {}).get("usage", 0.0)
    memory = (metrics.get("memory") or {}).get("usage", 0.0)
    return float(cpu), float(memory)


def _key(view: Mapping[str, Any]) -> str:
    metadata = view.get("metadata") or {}
    return f"{metadata.get('namespace', 'default')}/{metadata.get('name', '')}"


def from_files(paths: Mapping[str, Path | None], gap: float, interval: float, recent_seconds: float) -> Scene:
    """The scene of `nodes`, `pods`, `metrics` and `pod-metrics` files (`paths`, by those names)."""
    nodes_path, pods_path = paths.get("nodes"), paths.get("pods")
    if nodes_path is None or pods_path is None:
        raise SceneError("--nodes and --pods are both needed without --recording")
    nodes = read_nodes(nodes_path)
    pods = _pod_items(pods_path)
    metrics = read_metrics(paths.get("metrics"))
    base = {}
    for node in nodes:
        name = node["metadata"]["name"]
        usage = metrics.usage(name) if metrics is not None else None
        base[name] = (usage.cpu or 0.0, usage.memory or 0.0) if usage is not None else (0.0, 0.0)
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") and _running(p)]
    pending = [p for p in pods if not (p.get("spec") or {}).get("nodeName")][:MAX_ARRIVALS]
    if not pending:
        raise SceneError(f"{pods_path}: no pod without spec.nodeName: no pod to place")
    store = _learnt(paths.get("pod-metrics"), bound)
    arrivals = []
    for index, pod in enumerate(pending):
        estimate = store.estimate(pod) if store is not None else None
        cpu, memory = _use(pod, estimate)
        arrivals.append(Arrival(index * gap, pod, cpu, memory, estimate))
    residents = [(pod_view(p), p["spec"]["nodeName"]) for p in bound]
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    return Scene(nodes, base, residents, arrivals, start, interval, recent_seconds)


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _pod_items(path: Path) -> Sequence[Mapping[str, Any]]:
    document = _read(path)
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(i, Mapping) and i.get("metadata") for i in items):
        raise InputError(f"{path}: want a PodList (an object with an 'items' list of pods)")
    return items


def _read(path: Path) -> Any:
    try:
        return read_document(path)
    except SourceError as error:
        raise InputError(str(error)) from error


def _learnt(path: Path | None, pods: Sequence[Mapping[str, Any]]) -> UsageStore | None:
    """The usage estimates learnt from a PodMetricsList file, as the server learns them from a poll."""
    if path is None:
        return None
    store = UsageStore()
    try:
        record_poll(store, _read(path), [pod_view(p) for p in pods])
    except ValueError as error:
        raise InputError(f"{path}: {error}") from error
    return store
