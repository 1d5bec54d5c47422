"""The simulated cluster of `bench/placement.py`: nodes with system loads, workloads whose pods use another
amount than they request, waves of pods, and a metrics-server that samples node and pod usage.

Time is simulated (seconds from the start, as timestamps from a fixed epoch), so that a run is the same
whatever the machine does meanwhile: the samples, the pods' binding times and `recent` agree with each
other, not with the wall clock.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.rules.context import NodeUsage
from rulesched.tools.tune.model import Arrival, Scene

EPOCH = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.UTC)
CPU, MEMORY = 16.0, 64 * 2.0**30
REQUEST_CPU, REQUEST_MEMORY = 0.5, 512 * 2.0**20
APPS = {"light": 0.4, "steady": 1.0, "batch": 3.0}
"""Each workload's CPU use as a multiple of its request (500m): 200m, 500m and 1.5 cores."""
TEMPLATE_HASH = "7d9f8b6c5"
STARTUP = 2.0
"""Seconds after its binding before a pod uses its share and metrics-server reports it."""


def at(seconds: float) -> datetime.datetime:
    return EPOCH + datetime.timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return at(seconds).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Scenario:
    """One run's cluster: `nodes` nodes with system loads spread from `base_low` to `base_high` cores,
    `waves` waves of `per_wave` pods, `wave_gap` seconds apart, sampled every `interval` seconds."""

    seed: int
    nodes: int = 8
    per_wave: int = 21
    waves: int = 3
    wave_gap: float = 15.0
    interval: float = 10.0
    base_low: float = 0.2
    base_high: float = 5.0


@dataclass(slots=True)
class Placed:
    pod: Mapping[str, Any]
    node: str
    bound: float
    cpu: float
    memory: float


@dataclass
class World:
    """The nodes, the pods placed so far and what they really use; the latest samples."""

    scenario: Scenario
    base: dict[str, float]
    placed: list[Placed] = field(default_factory=list)
    samples: dict[str, NodeUsage] = field(default_factory=dict)
    polls: int = 0

    @classmethod
    def make(cls, scenario: Scenario) -> World:
        rng = random.Random(scenario.seed)
        count = scenario.nodes
        loads = [
            scenario.base_low + (scenario.base_high - scenario.base_low) * i / max(1, count - 1) for i in range(count)
        ]
        rng.shuffle(loads)
        return cls(scenario, {f"node-{i}": load for i, load in enumerate(loads)})

    def node_objects(self) -> list[dict[str, Any]]:
        return [node_object(name) for name in self.base]

    def used(self, node: str, now: float | None = None) -> float:
        """The node's real CPU use (at `now`: the pods started by then; None: every pod)."""
        running = (p for p in self.placed if p.node == node and (now is None or p.bound + STARTUP <= now))
        return self.base[node] + sum(p.cpu for p in running)

    def requested(self, node: str) -> tuple[float, float]:
        on = [p for p in self.placed if p.node == node]
        return len(on) * REQUEST_CPU, len(on) * REQUEST_MEMORY

    def sample(self, now: float) -> dict[str, Any]:
        """metrics-server's poll at `now`: every node's sample, and the PodMetricsList of the running pods."""
        self.samples = {n: NodeUsage(self.used(n, now), 2.0**30, at(now)) for n in self.base}
        self.polls += 1
        items = [pod_metrics(p, now) for p in self.placed if p.bound + STARTUP <= now]
        return {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}

    def bind(self, pod: Mapping[str, Any], node: str, now: float, rng: random.Random) -> dict[str, Any]:
        """The pod bound to `node` at `now` (as the pod watch then shows it); its real use, with some noise."""
        app = pod["metadata"]["labels"]["app"]
        cpu = REQUEST_CPU * APPS[app] * rng.uniform(0.9, 1.1)
        self.placed.append(Placed(pod, node, now, cpu, REQUEST_MEMORY * rng.uniform(0.5, 1.0)))
        bound = {**pod, "spec": {**pod["spec"], "nodeName": node}}
        condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(now)}
        return bound | {"status": {"phase": "Running", "conditions": [condition]}}


def node_object(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "1", "labels": {"filter.xy.com": "yes"}},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def make_pod(app: str, index: int) -> dict[str, Any]:
    name = f"{app}-{TEMPLATE_HASH}-{index:05d}"
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-{TEMPLATE_HASH}", "controller": True}
    metadata = {
        "name": name,
        "namespace": "shop",
        "uid": f"uid-{name}",
        "labels": {"app": app, "pod-template-hash": TEMPLATE_HASH},
        "ownerReferences": [owner],
    }
    requests = {"cpu": "500m", "memory": "512Mi"}
    container = {"name": app, "image": "registry.example/app", "resources": {"requests": requests}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}


def pod_metrics(placed: Placed, now: float) -> dict[str, Any]:
    metadata = placed.pod["metadata"]
    usage = {"cpu": f"{round(placed.cpu * 1e9)}n", "memory": f"{round(placed.memory / 1024)}Ki"}
    return {
        "metadata": {"name": metadata["name"], "namespace": metadata["namespace"], "labels": metadata["labels"]},
        "timestamp": stamp(now),
        "window": "15s",
        "containers": [{"name": "app", "usage": usage}],
    }


def waves(scenario: Scenario) -> list[list[tuple[float, dict[str, Any]]]]:
    """Each wave's pods with their arrival times: the apps mixed in equal parts, in a seeded order."""
    rng = random.Random(scenario.seed * 7919 + scenario.per_wave)
    found = []
    index = 0
    for wave in range(scenario.waves):
        apps = [list(APPS)[i % len(APPS)] for i in range(scenario.per_wave)]
        rng.shuffle(apps)
        start = wave * scenario.wave_gap + 1.0
        arrivals = []
        for offset, app in enumerate(apps):
            arrivals.append((start + 0.05 * offset, make_pod(app, index)))
            index += 1
        found.append(arrivals)
    return found


def scene(scenario: Scenario, kept: int | None = None) -> Scene:
    """The scenario as `rulesched tune` models it, with its first `kept` waves (None: all): each pod using its
    app's share, known to the usage estimates from the second wave on (the first meets workloads never
    measured: their requests), as the server with pod metrics learns them. Memory is sampled as a constant."""
    world = World.make(scenario)
    arrivals = []
    for number, wave in enumerate(waves(scenario)[:kept]):
        for arrived, pod in wave:
            use = REQUEST_CPU * APPS[pod["metadata"]["labels"]["app"]]
            estimate = {"cpu": use, "memory": REQUEST_MEMORY} if number else None
            arrivals.append(Arrival(arrived, pod, use, 0.0, estimate))
    base = {name: (load, 2.0**30) for name, load in world.base.items()}
    return Scene(world.node_objects(), base, [], arrivals, EPOCH, scenario.interval, 600.0, STARTUP)


class SampledMetrics:
    """The node metrics source the server reads: the world's latest samples (a MetricsSource)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def usage(self, name: str) -> NodeUsage | None:
        return self.world.samples.get(name)

    def generation(self) -> Hashable:
        return self.world.polls

    def newest_sample_age(self) -> float | None:
        return 0.0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def spread(values: Sequence[float], threshold: float) -> dict[str, float]:
    """Max, mean, max/mean, standard deviation of node CPU use, and the nodes above `threshold` times the mean."""
    mean = sum(values) / len(values)
    deviation = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    above = sum(1 for v in values if v > threshold * mean)
    return {"max": max(values), "mean": mean, "max/mean": max(values) / mean, "stddev": deviation, "above": above}
