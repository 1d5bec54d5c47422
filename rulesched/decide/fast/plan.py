"""How the fast path evaluates one RuleBook: what each rule depends on, and the caches that follow
(docs/architecture.md, "The caches").

A rule reading no request-side name (`rules/vocabulary.py`) is node-only: it has one result per node
context and rule book, computed the first time the node is a candidate and kept in the node's memo
(`memos.py`). A rule reading `pod`, `requests`, `namespaceObject` or `now` is per pod, memoized by a key
made of exactly what it reads of them (`keys.py`), so replicas of a workload, and pods alike there, are
lookups; it runs over each node's converted values, bound to the pod (`Program.bind`) when many nodes
differ, and nodes that look the same to it share one evaluation (`groups.py`). Verdicts are kept in tables
by key (`tables.py`), a verdict per node context; a newer context of a node takes its previous one's
entries over where they hold (`Caches.keep`), so that a call's verdicts are one lookup per candidate.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.decide.fast.budget import WORK_MEMO, WORK_POD, evaluation_work
from rulesched.decide.fast.caches import Caches
from rulesched.decide.fast.keys import PodRequest, key_of, trim
from rulesched.decide.fast.rule import Rule, Values, values_read
from rulesched.rules.cel import Engine
from rulesched.rules.compiled import CompiledFilter, CompiledRuleSet, CompiledScore
from rulesched.rules.estimate import ESTIMATE_NAME
from rulesched.rules.vocabulary import (
    NAMES,
    NODE_SIDE,
    PER_POD,
    SAMPLE,
    TIME,
    Key,
    NodeReader,
    RequestInputs,
    RequestReader,
    Side,
)


class Plan:
    """The book's rules classified: what each reads, where its results are kept, what its keys hold. Made once per
    rule book and never changed after (`__setattr__`); the results are kept by its `caches`."""

    def __init__(self, rule_sets: Sequence[CompiledRuleSet], engine: Engine, generation: int = 1) -> None:
        self.rule_sets = rule_sets
        self.engine = engine
        self.generation = generation
        """The rule book's generation, which its Decisions carry."""
        self.filters: list[list[Rule]] = []
        self.scores: list[list[Rule]] = []
        self.node_only: list[Rule] = []
        positions = itertools.count()
        for rule_set in rule_sets:
            self.filters.append([self._rule(next(positions), rule_set.name, f) for f in rule_set.filters])
        for rule_set in rule_sets:
            self.scores.append([self._rule(next(positions), rule_set.name, s) for s in rule_set.scores])
        rules = [r.compiled for group in (*self.filters, *self.scores) for r in group]
        self.per_pod = [r for group in (*self.filters, *self.scores) for r in group if r.per_pod]
        """The rules that read the pod (each node's projection for them groups alike nodes)."""
        conditions = [c for rs in rule_sets for c in rs.conditions]
        node_side = [e for e in NODE_SIDE if any(e.name in r.reads for r in rules)]
        self.node_values: Values[NodeReader] = values_read(node_side, [r.paths for r in rules])
        """The node-side names the book reads, how each is read off a node context, and the fields the book reads
        of it (None: all of it): only those are converted for the engine (rules that read none pay nothing)."""
        self.node_pods = [e.name for e in node_side if e.side is Side.NODE_PODS]
        """The pod-dependent node names the book reads."""
        self.sample_values = tuple(entry for entry in self.node_values if entry[0] in SAMPLE)
        """The node-side names the book reads that change with a node's metrics sample."""
        # A condition's paths: what it reads.
        sources = [*(r.compiled.paths for r in self.per_pod), *(c.paths for c in conditions)]
        read = [e for e in NAMES if e.read_request and any(e.name in paths for paths in sources)]
        self.request_values: Values[RequestReader] = values_read(read, sources)
        """The request-side names the book's per-pod rules and match conditions read, how each is read, and the
        fields they read of it (None: all of it)."""
        self.reads_estimate = any(e.name == ESTIMATE_NAME for e in read)
        """Whether a rule reads `estimate` (itself or through a variable): only then need a call find the pod's."""
        self.request_key = tuple(e.name for e in read if e.key in (Key.PROJECTED, Key.WHOLE))
        """The request-side names a pod's key holds (the time is kept beside it, for what reads it)."""
        self.conditions_read_now = any(name in c.paths for c in conditions for name in TIME)
        self.sample_slots = [r.slot for r in self.node_only if r.compiled.reads & SAMPLE]
        """Node-only rules that read the metrics sample: computed again when a node's sample changes."""
        self.sample_positions = frozenset(
            r.position for group in (*self.filters, *self.scores) for r in group if r.compiled.reads & SAMPLE
        )
        self.filters_read_sample = any(r.compiled.reads & SAMPLE for group in self.filters for r in group)
        self.conditions_work = WORK_POD + sum(evaluation_work(c.cost) for c in conditions)
        """The estimated microseconds to find which rule sets apply to a pod never seen."""
        self.memo_work = WORK_MEMO + sum(rule.work for rule in self.node_only)
        """The estimated microseconds to make a node's memo, its node-only rules run."""
        self.caches = Caches(self)
        """The caches of every call against this book (`caches.py`): the plan itself never changes."""
        self._made = True

    def __setattr__(self, name: str, value: object) -> None:
        if getattr(self, "_made", False):
            raise AttributeError(f"a plan does not change: {name}")
        object.__setattr__(self, name, value)

    def _rule(self, position: int, rule_set: str, compiled: CompiledFilter | CompiledScore) -> Rule:
        per_pod = bool(compiled.reads & PER_POD)
        slot = -1 if per_pod else len(self.node_only)
        reads, paths = compiled.reads, compiled.paths
        pod_key = tuple(
            (e.name, paths.get(e.name, frozenset()) if e.key is Key.PROJECTED else None)
            for e in NAMES
            if e.name in reads and e.key in (Key.PROJECTED, Key.WHOLE) and e.side is Side.REQUEST
        )
        node_key = tuple(
            (e.read_node, paths.get(e.name, frozenset())) for e in NODE_SIDE if e.name in reads and e.read_node
        )
        work = evaluation_work(compiled.cost)
        rule = Rule(position, rule_set, compiled, per_pod, bool(reads & TIME), slot, work, pod_key, node_key)
        if not per_pod:
            self.node_only.append(rule)
        return rule

    def request(
        self,
        pod: Mapping[str, Any],
        now: datetime.datetime,
        namespace: Mapping[str, Any] | None = None,
        estimate: Mapping[str, float] | None = None,
    ) -> PodRequest:
        """The pod's trimmed values and their key (the same for every replica of a workload, while their
        `estimate`, when a rule reads it, is the same: None is the default fallback, the pod's requests)."""
        inputs = RequestInputs(pod, namespace, now, estimate)
        values: dict[str, Any] = {}
        for name, read, paths in self.request_values:
            value = read(inputs)
            values[name] = value if paths is None else trim(value, paths)
        return PodRequest(values, key_of([values[name] for name in self.request_key]), now)
