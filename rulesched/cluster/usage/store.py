"""What a pod of each workload really uses: a bounded summary per workload, and the pod's `estimate`.

The pods of a workload (a Deployment, a StatefulSet, a Job: the owner controller, a ReplicaSet named for
its Deployment; or, for a pod without one, its labels) use alike. Each poll of the pods' usage
(`rulesched/cluster/usage/pod_metrics.py`: metrics-server's `pods.metrics.k8s.io`) gives, per workload, the
`quantile` of its pods' CPU and memory; the last `window` polls' values are kept, and a new pod's estimate
is their `quantile` again. Memory is per workload (at most `max_workloads`, the least recently sampled
or asked for forgotten first), never per pod. A workload never seen gets the fallback
(`rules.estimate.Fallback`: a factor of its requests or limits).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rulesched.cluster.sources import items_of
from rulesched.rules.estimate import REQUESTS, RESOURCES, Fallback, fallback_estimate
from rulesched.rules.pod_values import pod_requests
from rulesched.rules.quantity import QuantityError, quantity_value

TEMPLATE_HASH = "pod-template-hash"
"""The label a Deployment's ReplicaSet adds to its pods and to its own name (`web-5d8f7c9b4`)."""
_GENERATED_LABELS = frozenset({TEMPLATE_HASH, "controller-revision-hash", "statefulset.kubernetes.io/pod-name"})
"""Labels that differ between the pods of one workload: left out of a label-set workload."""


@dataclass(frozen=True, slots=True)
class UsageOptions:
    """How the summary is kept: `window` polls of each workload, the `quantile` taken, `max_workloads` kept."""

    window: int = 6
    quantile: float = 0.9
    max_workloads: int = 10_000


def _metadata(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = pod.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _controller(owners: object) -> tuple[str, str] | None:
    """The owner controller's kind and name, from `ownerReferences`."""
    for owner in owners if type(owners) is list else ():
        if type(owner) is dict and owner.get("controller") is True:
            kind, name = owner.get("kind"), owner.get("name")
            if type(kind) is str and type(name) is str and kind and name:
                return kind, name
    return None


def workload_of(pod: Mapping[str, Any]) -> str | None:
    """The workload a pod (or its view) belongs to, as `namespace/Kind/name`, or `namespace/labels:k=v,…`
    for a pod without an owner controller; None for a pod with neither (it has no siblings to learn from).
    (Once per sampled pod in every poll: plain type checks, decoded JSON is made of dicts and lists.)"""
    metadata = _metadata(pod)
    namespace = metadata.get("namespace") or "default"
    labels = metadata.get("labels")
    labels = labels if type(labels) is dict else {}
    owner = _controller(metadata.get("ownerReferences"))
    if owner is not None:
        kind, name = owner
        template = labels.get(TEMPLATE_HASH)
        if kind == "ReplicaSet" and type(template) is str and template and name.endswith("-" + template):
            stripped = name[: -len(template) - 1]
            kind, name = ("Deployment", stripped) if stripped else (kind, name)
        return f"{namespace}/{kind}/{name}"
    kept = sorted(f"{k}={v}" for k, v in labels.items() if k not in _GENERATED_LABELS)
    return f"{namespace}/labels:{','.join(kept)}" if kept else None


_DECIMAL = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}
_DIVISORS = {"n": 1e9, "u": 1e6, "m": 1e3}
"""Divided rather than multiplied by the small factors: correctly rounded (1521093117n is 1.521093117)."""
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def usage_number(value: object) -> float | None:
    """A usage quantity as metrics-server writes it (`152614315n`, `1530504Ki`, `250m`) without the general
    parser, which would be most of a poll's time; any other form through it. None when invalid."""
    if type(value) is str:
        if value[-2:] in _BINARY and value[:-2].isdigit():
            return int(value[:-2]) * _BINARY[value[-2:]]
        if value[-1:] in _DECIMAL and value[:-1].isdigit():
            unit = value[-1:]
            return int(value[:-1]) / _DIVISORS[unit] if unit in _DIVISORS else int(value[:-1]) * _DECIMAL[unit]
        if value.isdigit():
            return float(value)
    try:
        return quantity_value(value)
    except QuantityError:
        return None


def quantile(values: Iterable[float], q: float) -> float:
    """The `q` quantile of `values` (nearest rank: one of the values); 0 for none."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[min(rank, len(ordered) - 1)]


class Summary:
    """One workload's last `window` polls: each poll's quantile of CPU (cores) and memory (bytes) per pod,
    and the estimate they give. Plain lists and a tuple: about 400 bytes a workload (a deque is 600 alone)."""

    __slots__ = ("cpu", "estimate", "memory")

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.memory: list[float] = []
        self.estimate: tuple[float, float, float] = (0.0, 0.0, 0.0)
        """cpu, memory and the number of polls: made when a poll is added, read by every request."""

    def add(self, cpu: float, memory: float, window: int, q: float) -> None:
        self.cpu.append(cpu)
        self.memory.append(memory)
        del self.cpu[:-window], self.memory[:-window]
        self.estimate = (quantile(self.cpu, q), quantile(self.memory, q), float(len(self.cpu)))


PodUsage = tuple[float, float]
"""A pod's usage in one sample: CPU in cores, memory in bytes."""
Views = Callable[[], Iterable[Mapping[str, Any]]]
"""The pods known now (views or whole pods): where a sampled pod's workload is found."""


class UsageStore:
    """The summaries by workload, bounded (least recently sampled or asked for forgotten first). Thread-safe:
    the poller's thread records, requests read."""

    def __init__(self, options: UsageOptions = UsageOptions(), fallback: Fallback = REQUESTS) -> None:
        self.options = options
        self.fallback = fallback
        self._summaries: OrderedDict[str, Summary] = OrderedDict()
        self._lock = threading.Lock()
        self.polls = 0
        self.preferred_until = 0.0
        """POSIX seconds until which metrics-server's pod polls give way: a MetricSource's `podUsage` answered
        (cluster/usage/prometheus_pods.py), and its answers count until its `maxAge`."""

    def record(self, by_workload: Mapping[str, Iterable[PodUsage]]) -> None:
        """One poll: the usage of the pods of each workload sampled."""
        q, window = self.options.quantile, self.options.window
        made = {}
        for workload, usages in by_workload.items():
            found = list(usages)
            if found:
                made[workload] = (quantile((u[0] for u in found), q), quantile((u[1] for u in found), q))
        with self._lock:
            for workload, (cpu, memory) in made.items():
                summary = self._summaries.pop(workload, None) or Summary()
                summary.add(cpu, memory, window, q)
                self._summaries[workload] = summary
            while len(self._summaries) > self.options.max_workloads:
                self._summaries.popitem(last=False)
            self.polls += 1

    def learnt(self, workload: str | None) -> dict[str, float] | None:
        """The estimate learnt for `workload`, None when never sampled (or forgotten)."""
        if workload is None:
            return None
        with self._lock:
            summary = self._summaries.get(workload)
            if summary is None:
                return None
            self._summaries.move_to_end(workload)
        cpu, memory, samples = summary.estimate
        return {"cpu": cpu, "memory": memory, "samples": samples}

    def estimate(self, pod: Mapping[str, Any], requests: Mapping[str, float] | None = None) -> dict[str, float]:
        """The pod's `estimate`: what its workload's pods used, else the fallback (`requests`: the pod's,
        when known already, as in a pod's view)."""
        found = self.learnt(workload_of(pod))
        if found is not None:
            return found
        if requests is None and not isinstance(pod.get("spec"), Mapping):
            requests = pod.get("requests") if isinstance(pod.get("requests"), Mapping) else {}
        return fallback_estimate(pod, self.fallback, requests if requests is not None else pod_requests(pod))

    def size(self) -> int:
        return len(self._summaries)


def group_by_workload(
    usages: Mapping[tuple[str, str], PodUsage], pods: Iterable[Mapping[str, Any]]
) -> dict[str, list[PodUsage]]:
    """The sampled pods' usage (by namespace and name) grouped by the workload of the pods known by name."""
    grouped: dict[str, list[PodUsage]] = {}
    for pod in pods:
        metadata = pod.get("metadata")
        if type(metadata) is not dict:
            continue
        usage = usages.get((metadata.get("namespace") or "default", metadata.get("name") or ""))
        workload = workload_of(pod) if usage is not None else None
        if workload is not None and usage is not None:
            found = grouped.get(workload)
            if found is None:
                grouped[workload] = [usage]
            else:
                found.append(usage)
    return grouped


def parse_pod_metrics(document: object) -> dict[tuple[str, str], PodUsage]:
    """A PodMetricsList's usage by pod (namespace, name): its containers summed."""
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list):
        raise ValueError("not a PodMetricsList (no 'items' list)")
    found: dict[tuple[str, str], PodUsage] = {}
    for item in items:
        metadata = _metadata(item) if isinstance(item, Mapping) else {}
        name = metadata.get("name")
        containers = item.get("containers") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not isinstance(containers, list):
            continue
        total = dict.fromkeys(RESOURCES, 0.0)
        for container in containers:
            usage = container.get("usage") if isinstance(container, Mapping) else None
            for resource in RESOURCES:
                value = usage_number(usage.get(resource)) if isinstance(usage, Mapping) else None
                total[resource] += value or 0.0
        found[(str(metadata.get("namespace") or "default"), name)] = (total["cpu"], total["memory"])
    return found


def record_usage(
    store: UsageStore, usages: Mapping[tuple[str, str], PodUsage], pods: Iterable[Mapping[str, Any]]
) -> int:
    """Record one poll's usage (by pod namespace and name) in `store`; how many pods had a known workload."""
    grouped = group_by_workload(usages, pods)
    store.record(grouped)
    return sum(len(u) for u in grouped.values())


def record_poll(store: UsageStore, document: object, pods: Iterable[Mapping[str, Any]]) -> int:
    """Record one PodMetricsList (decoded) in `store`; how many sampled pods had a known workload."""
    return record_usage(store, parse_pod_metrics(document), pods)


class FilePodMetrics:
    """Pod usage from a PodMetricsList file (`--pod-metrics-file`): recorded once, a fixed snapshot."""

    def __init__(self, path: Path, store: UsageStore, pods: Iterable[Mapping[str, Any]]) -> None:
        self.store = store
        self.seconds: float | None = None
        self.sampled = record_poll(store, {"items": items_of(path, "PodMetricsList")}, pods)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass
