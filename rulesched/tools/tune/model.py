"""The placement model of `rulesched tune`: arrivals placed one by one as kube-scheduler with rulesched would.

A `Scene` is a cluster (node objects, what each node uses apart from the arriving pods, the pods already on
it) and the pods that arrive, each with when it arrives and what it really uses. `simulate` places them:
metrics-server polls every `interval` seconds (a pod counts in its node's sample once it has run `startup`
seconds); for each arrival kube-scheduler's own filters (`kube.py`), then the rule book's filters and
scores evaluated as the server evaluates them (`decide.fast.evaluate` on node contexts whose `recent`
counts the pods placed since the node's sample, with each pod's usage estimate), the rules' scores combined
with the weights tried, kube-scheduler's score plugins added, the top node taken (ties at random, seeded).
The weights are applied to each rule's normalized score, so one rule book serves every weight tried.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.semantics import round_score
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext, NodeUsage, node_context, node_pods
from rulesched.rules.pod_values import pod_identity, pod_view
from rulesched.tools.tune.kube import Demand, NodeState, extender_part, fits, owner_of, plugin_scores


@dataclass(frozen=True, slots=True)
class Arrival:
    """A pod to place: when it arrives (seconds from the scene's start), what it really uses (cores, bytes)
    and what the server's usage estimates say it will use (None: its requests, the fallback)."""

    at: float
    pod: Mapping[str, Any]
    cpu: float
    memory: float
    estimate: Mapping[str, float] | None = None

    @property
    def name(self) -> str:
        identity = pod_identity(self.pod)
        return f"{identity['namespace']}/{identity['name']}"


@dataclass(frozen=True, slots=True)
class Scene:
    """A cluster and the pods that arrive in it."""

    nodes: Sequence[Mapping[str, Any]]
    base: Mapping[str, tuple[float, float]]
    """Per node, the cores and bytes used apart from the arrivals (the system and the pods already there)."""
    residents: Sequence[tuple[Mapping[str, Any], str]]
    """The pods on the nodes at the start (pod views), and their nodes."""
    arrivals: Sequence[Arrival]
    start: datetime.datetime
    interval: float = 15.0
    """Seconds between metrics polls (the server's `--metrics-interval`)."""
    recent_seconds: float = 30.0
    startup: float = 2.0
    """Seconds after its binding before a pod's use shows in its node's sample."""

    def part(self, arrivals: Sequence[Arrival]) -> Scene:
        """The same cluster with other arrivals."""
        return dataclasses.replace(self, arrivals=arrivals)


@dataclass(frozen=True, slots=True)
class Weights:
    """What tuning changes: each Enforce score rule's weight (by `rule-set/rule`) and the extender's weight."""

    rules: Mapping[str, float]
    extender: float

    def as_dict(self) -> dict[str, Any]:
        return {"rules": dict(self.rules), "extender": self.extender}


@dataclass(slots=True)
class Outcome:
    """One simulation: where each pod went, each node's use at the end, the pods no node took."""

    placements: dict[str, str]
    cpu: dict[str, float]
    unschedulable: int
    allocatable: dict[str, float]
    scored: frozenset[str] = frozenset()
    """The Enforce score rules (`rule-set/rule`) that ranked some pod's nodes: the only weights that matter."""

    def figures(self, threshold: float) -> dict[str, float]:
        """max/mean and standard deviation of node CPU use; nodes left empty; nodes above `threshold` of their
        allocatable CPU."""
        values = list(self.cpu.values())
        mean = statistics.fmean(values)
        used = set(self.placements.values())
        over = sum(1 for n, v in self.cpu.items() if self.allocatable.get(n) and v > threshold * self.allocatable[n])
        return {
            "max/mean": max(values) / mean if mean else 1.0,
            "stddev": statistics.pstdev(values),
            "empty": float(sum(1 for n in self.cpu if n not in used)),
            "over": float(over),
            "unschedulable": float(self.unschedulable),
        }


@dataclass(slots=True)
class _Placed:
    view: Mapping[str, Any]
    bound: float
    cpu: float
    memory: float
    estimate: Mapping[str, float]


@dataclass
class _Node:
    state: NodeState
    base: tuple[float, float]
    placed: list[_Placed] = field(default_factory=list)
    views: list[Mapping[str, Any]] = field(default_factory=list)
    sample: NodeUsage | None = None
    version: int = 0


class _Run:
    """One simulation's state."""

    def __init__(self, scene: Scene, book: RuleBook, kube: Mapping[str, int], weights: Weights, seed: int) -> None:
        self.scene, self.book, self.kube, self.weights = scene, book, kube, weights
        self.rng = random.Random(seed)
        self.phase = self.rng.uniform(0, scene.interval) if seed else 0.0
        """When the first poll comes (seed 0: at the start): a pod placed between two polls is not in the sample."""
        self.nodes: dict[str, _Node] = {}
        for node in scene.nodes:
            name = node["metadata"]["name"]
            self.nodes[name] = _Node(NodeState(node), scene.base.get(name, (0.0, 0.0)))
        for view, name in scene.residents:
            if name in self.nodes:
                self.nodes[name].state.add(Demand.of_requests(view.get("requests") or {}), owner_of(view))
                self.nodes[name].views.append(view)
        self.scored: set[str] = set()
        self.polled = math.floor(-self.phase / scene.interval) - 1
        self.poll(0.0)  # metrics-server polled before the first arrival too: every node starts with a sample

    def at(self, seconds: float) -> datetime.datetime:
        return self.scene.start + datetime.timedelta(seconds=seconds)

    def poll(self, now: float) -> None:
        """Every poll due by `now`: each node's sample, of the pods running by then."""
        interval = self.scene.interval
        due = math.floor((now - self.phase) / interval)
        for index in range(self.polled + 1, due + 1):
            when = self.phase + index * interval
            for node in self.nodes.values():
                running = [p for p in node.placed if p.bound + self.scene.startup <= when]
                cpu = node.base[0] + sum(p.cpu for p in running)
                memory = node.base[1] + sum(p.memory for p in running)
                node.sample = NodeUsage(cpu, memory, self.at(when))
        self.polled = max(self.polled, due)

    def context(self, name: str, now: float) -> NodeContext:
        node = self.nodes[name]
        stamp = node.sample.timestamp if node.sample else None
        sampled = (stamp - self.scene.start).total_seconds() if stamp is not None else None
        window = now - self.scene.recent_seconds
        cutoff = sampled if sampled is not None else window
        recent = [p for p in node.placed if p.bound > cutoff]
        pods = node_pods(node.views, [p.view for p in recent], (name, node.version), [p.estimate for p in recent])
        return node_context(node.state.node, node.sample, self.at(now), pods)

    def place(self, arrival: Arrival) -> str | None:
        self.poll(arrival.at)
        demand = Demand.of(arrival.pod)
        feasible = [n for n, node in self.nodes.items() if fits(arrival.pod, demand, node.state)]
        if not feasible:
            return None
        now = self.at(arrival.at)
        contexts = [self.context(n, arrival.at) for n in feasible]
        plan = prepared(self.book)
        asked = Call(arrival.pod, contexts, Verb.FILTER, now, estimate=arrival.estimate)
        passed = evaluate(plan, asked).passed
        if len(passed) <= 1:
            return passed[0] if passed else None
        chosen = [c for c in contexts if c.name in set(passed)]
        decision = evaluate(plan, Call(arrival.pod, chosen, Verb.PRIORITIZE, now, estimate=arrival.estimate))
        return self.top(arrival, passed, decision, demand)

    def top(self, arrival: Arrival, passed: list[str], decision: Decision, demand: Demand) -> str:
        states = [self.nodes[n].state for n in passed]
        own = plugin_scores(arrival.pod, demand, states, self.kube, len(self.nodes))
        verdicts = decision.nodes
        self.scored.update(f"{r.rule_set}/{r.rule}" for r in verdicts[passed[0]].scores if r.enforce)
        totals = {
            name: own[i]
            + extender_part(extender_score(verdicts[name].scores, self.weights.rules), self.weights.extender)
            for i, name in enumerate(passed)
        }
        best = max(totals.values())
        return self.rng.choice([n for n in passed if totals[n] == best])

    def bind(self, arrival: Arrival, name: str) -> None:
        node = self.nodes[name]
        view = pod_view(arrival.pod)
        estimate = dict(arrival.estimate) if arrival.estimate is not None else dict(view["requests"])
        node.state.add(Demand.of(arrival.pod), owner_of(arrival.pod))
        node.placed.append(_Placed(view, arrival.at, arrival.cpu, arrival.memory, estimate))
        node.views.append(view)
        node.version += 1


def extender_score(scores: Sequence[Any], weights: Mapping[str, float]) -> int:
    """The node's extender score (0..10) with each Enforce score rule weighted by `weights` (its own weight
    when not named): the weighted mean of the normalized scores, rounded as the server rounds it."""
    total = weight_sum = 0.0
    for result in scores:
        if not result.enforce:
            continue
        weight = weights.get(f"{result.rule_set}/{result.rule}", result.weight)
        total += weight * result.normalized
        weight_sum += weight
    return round_score(total / weight_sum) if weight_sum else 0


def simulate(scene: Scene, book: RuleBook, kube: Mapping[str, int], weights: Weights, seed: int) -> Outcome:
    """The scene's arrivals placed with `weights`; `seed` picks among ties, the poll phase (seed 0: polls from
    the start) and a noise of +-10% on each pod's real use."""
    run = _Run(scene, book, kube, weights, seed)
    placements: dict[str, str] = {}
    unschedulable = 0
    noise = random.Random(seed * 7919 + 1)
    for arrival in sorted(scene.arrivals, key=lambda a: a.at):
        if seed:
            factor = noise.uniform(0.9, 1.1)
            arrival = Arrival(arrival.at, arrival.pod, arrival.cpu * factor, arrival.memory, arrival.estimate)
        name = run.place(arrival)
        if name is None:
            unschedulable += 1
            continue
        run.bind(arrival, name)
        placements[arrival.name] = name
    cpu = {n: node.base[0] + sum(p.cpu for p in node.placed) for n, node in run.nodes.items()}
    allocatable = {n: node.state.allocatable()[0] / 1000 for n, node in run.nodes.items()}
    return Outcome(placements, cpu, unschedulable, allocatable, frozenset(run.scored))
