"""How the fast engine evaluates one RuleBook: what each rule depends on, and the caches that follow.

DESIGN.md §4. A rule reading only `node`, `metrics` and `allocatable` (node-only) has one result per
node version and rule book, computed the first time the node is a candidate and kept in the node's
memo (`NodeMemo`, one per node context, owned by the plan). A rule reading `pod`, `requests` or `now`
(per pod) is evaluated per pod, memoized by a key made of exactly the pod fields that rule reads
(`PodRequest.rule_key`), so replicas of a workload, and pods alike in those fields, are lookups. Each
node's engine values are converted once per version, trimmed to the node fields the rules read, and
per-pod rules are bound to the pod (`Program.bind`) so that these per-node values serve every pod.
Nodes that look the same to a per-pod rule (equal projections: the same zone label, say) share one
evaluation, so a pod never seen before costs one evaluation per distinct projection, not per node.

Verdicts are kept in tables by key (`Verdicts`: a filter key, a prioritize key), each a verdict per node
context; a filter verdict names no node, so the nodes that fare alike share one. A newer context of a
node takes its previous one's entries over where they hold (`Plan.keep`), and a call's verdicts are one
lookup per candidate.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rulesched.decide.decision import NodeDecision
from rulesched.decide.fast.outcomes import Applying, Errors, FailedVerdict, Kind, NodeOutcome, ScoreOutcome
from rulesched.rules.cel import CelCompileError, Engine, Program
from rulesched.rules.cel.analysis import Path
from rulesched.rules.compiled import CompiledFilter, CompiledRuleSet, CompiledScore, Paths
from rulesched.rules.context import Change, NodeContext
from rulesched.rules.vocabulary import (
    DERIVED,
    NAMES,
    NODE_SIDE,
    NODE_SIDES,
    PER_POD,
    SAMPLE,
    TIME,
    Key,
    Name,
    NodeReader,
    RequestInputs,
    RequestReader,
    Side,
)

BOUND_KEPT = 256
"""Programs bound to a pod kept per plan (each a compiled expression: a few kilobytes)."""
APPLYING_KEPT = 1024
"""Pod keys whose applying rule sets are kept per plan."""
NODE_MEMO_KEPT = 8
"""Per node, how many pod keys keep their per-pod results."""
TABLES_KEPT = 8
"""Verdict tables kept per plan, for filter and for prioritize each: one per filter key (the applying rule
sets and the pod fields the filters read; filter verdicts are shared by the nodes that fare alike) or
prioritize key (the same, and each MinMax rule's range over the candidates), each holding a verdict per
node context."""
INTERNED_KEPT = 4096
"""Interned outcomes and memo keys per plan; the table is cleared when full."""
SIGNATURES_KEPT = 64
"""Node signature tables per plan: one per set of node-only filters a filter key runs (its rule sets')."""
MEMOS_KEPT = 20_000
"""Node memos per plan: one per node name (a new context of a node replaces the memo of its previous
one), so this only bounds the names of nodes that went away; the oldest are forgotten first."""

_PROJECTIONS = json.JSONEncoder(default=str)
_tokens = itertools.count(1)
_signatures = itertools.count(1)
K = TypeVar("K", bound=Hashable)
H = TypeVar("H", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Rule:
    """A filter or score of the book, where it stands in evaluation order and what it depends on."""

    position: int
    """Filters of every rule set in book order, then scores: the order errors are reported in."""
    rule_set: str
    compiled: CompiledFilter | CompiledScore
    per_pod: bool
    reads_now: bool
    slot: int
    """Index among the book's node-only rules (their cached results), or -1 for a per-pod rule."""
    work: float
    """The estimated microseconds of one evaluation (`evaluation_work`)."""
    pod_key: tuple[tuple[str, frozenset[Path] | None], ...]
    """The request-side names the rule reads that its pod key holds, each with the fields it reads of it
    (None: the whole value): `PodRequest.rule_key`."""
    node_key: tuple[tuple[NodeReader, frozenset[Path]], ...]
    """How each node-side name the rule reads is read off a node context, and the fields it reads of it:
    `projection`."""

    @property
    def min_max(self) -> bool:
        """A score normalized MinMax: its range over the candidates counts."""
        return isinstance(self.compiled, CompiledScore) and self.compiled.normalize == "MinMax"


@dataclass(slots=True, eq=False)
class NodeMemo:
    """What the plan keeps for one NodeContext: its engine values and every result found for it.

    Compared by identity, like the contexts it is kept for."""

    values: Mapping[str, object]
    """The node's values converted for the engine, by context name."""
    bindings: object = None
    """Engine bindings of `values`, kept once a per-pod rule has run on this node (see `node_bindings`)."""
    node_only: list[NodeOutcome] | None = None
    """By slot, each node-only rule's outcome (`Rule.slot`)."""
    per_pod: dict[tuple[int, Hashable], ScoreOutcome] = field(default_factory=dict)
    """By per-pod score rule position and pod key (`PodRequest.rule_key`), the rule's outcome."""
    carried: list[NodeOutcome | None] | None = None
    """A memo made again after a new metrics sample (`Plan.resampled`): the node-only results taken over
    from the previous memo, None for each rule that reads `metrics`, until they are complete (`node_only`)."""
    resampled: bool = False
    """Made by `Plan.resampled`: the filter verdicts of the previous memo hold when no filter reads `metrics`."""


@dataclass(slots=True)
class PodRequest:
    """The per-pod side of one evaluation: plain values to bind, and the key that identifies them."""

    values: Mapping[str, Any]
    key: str
    now: datetime.datetime
    rule_keys: dict[int, str] = field(default_factory=dict, compare=False)
    """By rule position: `rule_key`'s, made once per request."""

    def key_for(self, reads_now: bool) -> Hashable:
        return (self.key, self.now) if reads_now else self.key

    def rule_key(self, rule: Rule) -> Hashable:
        """What identifies this pod to one per-pod rule: exactly the pod fields, requests and namespace
        fields that rule reads (and the time, when it reads it). Two pods alike there get the same results
        from it, whatever else differs (a new namespace, say, that only a match condition reads)."""
        key = self.rule_keys.get(rule.position)
        if key is None:
            values = self.values
            parts = [values.get(n) if paths is None else trim(values.get(n), paths) for n, paths in rule.pod_key]
            key = self.rule_keys[rule.position] = key_of(parts)
        return (key, self.now) if rule.reads_now else key


class NeedsEvaluationError(Exception):
    """Raised under `within()` where an evaluation would compute more than it may (`within(0)`: anything but a
    lookup in the caches)."""


WORK_EVALUATION = 20.0
"""Estimated microseconds of one CEL evaluation of a cheap expression, its bindings made (measured: 5-15)."""
WORK_COST = 0.02
"""Estimated microseconds per unit of an expression's estimated worst-case cost (docs/rules/cost.md)."""
WORK_NODE = 1.0
"""Estimated microseconds of Python per candidate whose verdict is made or kept (measured: about 0.5)."""
WORK_POD = 50.0
"""Estimated microseconds to convert a pod's values for the engine (measured: 10-30 for a trimmed pod)."""
WORK_MEMO = 80.0
"""Estimated microseconds to make a node's memo: its values converted for the engine (measured: about 40),
before its node-only rules run."""
WORK_PROJECTION = 10.0
"""Estimated microseconds to make a node's projection for a per-pod rule (measured: about 5)."""
WORK_BIND = 500.0
"""Estimated microseconds to compile a program bound to a pod's values (measured: about 400)."""


def evaluation_work(cost: int) -> float:
    """The estimated microseconds of one evaluation of an expression of estimated worst-case `cost`."""
    return WORK_EVALUATION + cost * WORK_COST


class _Mode(threading.local):
    budget: float | None = None
    """Estimated microseconds of work evaluations may still do, in `within()`; None: no bound."""


_mode = _Mode()


class within:  # noqa: N801  (used as a function: `with within(budget):`)
    """Evaluations in this block may compute about `budget` microseconds of estimated work (`work`), from the
    rules' estimated costs: before a step that would go past it they raise `NeedsEvaluationError`, so that
    what they kept in the caches is only complete results. The extender evaluates a call within its
    `--loop-work` on its event loop, and runs the others in its evaluation thread. (A class, not a
    generator: entered on every call the extender answers.)"""

    __slots__ = ("budget",)

    def __init__(self, budget: float) -> None:
        self.budget = budget

    def __enter__(self) -> None:
        _mode.budget = self.budget

    def __exit__(self, *failure: object) -> None:
        _mode.budget = None


def work(estimate: float = math.inf) -> None:
    """Called where an evaluation is about to compute about `estimate` microseconds (unknown: infinite);
    raises within a budget it would go past."""
    budget = _mode.budget
    if budget is not None:
        if estimate > budget:
            raise NeedsEvaluationError
        _mode.budget = budget - estimate


def remember(cache: dict[K, V], key: K, value: V, kept: int) -> V:
    """Store `value`, forgetting the oldest entries beyond `kept` (dicts keep insertion order)."""
    cache[key] = value
    while len(cache) > kept:
        del cache[next(iter(cache))]
    return value


def trim(value: Any, paths: Iterable[Path]) -> Any:
    """`value` keeping only what the field `paths` reach; anything not a map is kept whole."""
    return _trimmed(value, _tree(paths))


Tree = dict[str, "Tree | None"]
"""Field paths as a tree: each field read, and what is read under it (None: all of it)."""
_TREES: dict[object, Tree | None] = {}
_TREES_KEPT = 1024
"""Field path sets whose trees are kept (a rule book has a few per rule); all forgotten when full."""


def _tree(paths: Iterable[Path]) -> Tree | None:
    """`paths` as a tree, made once per set of paths (`trim` runs for every request's pod)."""
    try:
        return _TREES[paths]
    except KeyError:
        if len(_TREES) >= _TREES_KEPT:
            _TREES.clear()
        tree = _TREES[paths] = _tree_of(paths)
        return tree
    except TypeError:  # not hashable (a list, say): not kept
        return _tree_of(paths)


def _tree_of(paths: Iterable[Path]) -> Tree | None:
    selected = list(paths)
    if () in selected:
        return None
    by_field: dict[str, list[Path]] = {}
    for path in selected:
        by_field.setdefault(path[0], []).append(path[1:])
    return {name: _tree_of(rest) for name, rest in by_field.items()}


def _trimmed(value: Any, tree: Tree | None) -> Any:
    if tree is None or not (type(value) is dict or isinstance(value, Mapping)):
        return value
    return {name: _trimmed(value[name], rest) for name, rest in tree.items() if name in value}


def key_of(parts: list[object]) -> str:
    """A key for JSON-like values: equal keys only for equal values (`repr` tells 1 from True and from "1",
    and a float's is exact); equal values in another key order may get another key, which only misses."""
    return repr(parts)


def projection(rule: Rule, node: NodeContext) -> bytes:
    """Exactly the node-side values `rule` reads, as bytes: nodes with equal projections get equal results.

    Key order is kept (not sorted): a rule iterating a map sees its order."""
    return _PROJECTIONS.encode([trim(read(node), paths) for read, paths in rule.node_key]).encode()


def _union(paths: Iterable[Paths], name: str) -> frozenset[Path]:
    return frozenset().union(*(p.get(name, frozenset()) for p in paths))


Reader = TypeVar("Reader", NodeReader, RequestReader)
Values = tuple[tuple[str, Reader, frozenset[Path] | None], ...]
"""Names, each with how its value is read and the fields read of it (None: all of it)."""


def _values(read: Iterable[Name], sources: Sequence[Paths]) -> Values[Any]:
    """Each name of `read` with its reader, and the fields `sources` read of it when it is trimmed (else None)."""
    found = []
    for entry in read:
        reader = entry.read_node if entry.side in NODE_SIDES else entry.read_request
        assert reader is not None
        found.append((entry.name, reader, _union(sources, entry.name) if entry.trimmed else None))
    return tuple(found)


class Plan:
    """The book's rules classified, with the caches shared by every request against this book."""

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
        per_pod = [r.compiled for group in (*self.filters, *self.scores) for r in group if r.per_pod]
        conditions = [c for rs in rule_sets for c in rs.conditions]
        node_side = [e for e in NODE_SIDE if any(e.name in r.reads for r in rules)]
        self.node_values: Values[NodeReader] = _values(node_side, [r.paths for r in rules])
        """The node-side names the book reads, how each is read off a node context, and the fields the book reads
        of it (None: all of it): only those are converted for the engine (rules that read none pay nothing)."""
        self.node_pods = [e.name for e in node_side if e.side is Side.NODE_PODS]
        """The pod-dependent node names the book reads."""
        self.sample_values = tuple(entry for entry in self.node_values if entry[0] in SAMPLE)
        """The node-side names the book reads that change with a node's metrics sample."""
        sources = [*(r.paths for r in per_pod), *(c.paths for c in conditions)]  # a condition's paths: its reads
        read = [e for e in NAMES if e.read_request and any(e.name in paths for paths in sources)]
        self.request_values: Values[RequestReader] = _values(read, sources)
        """The request-side names the book's per-pod rules and match conditions read, how each is read, and the
        fields they read of it (None: all of it)."""
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
        self.reset()

    def reset(self) -> None:
        """Forget every result kept (results cut short by a deadline must not be reused): a new token, so
        no memo key made before matches, and empty caches."""
        self.token = next(_tokens)
        self._bound: OrderedDict[Hashable, Program | None] = OrderedDict()
        self.applying: dict[Hashable, Applying] = {}
        self._interned: dict[Hashable, object] = {}
        self.memo_of: dict[NodeContext, NodeMemo] = {}
        """Each node context's memo (contexts hash by identity: one lookup per candidate)."""
        self.filter_tables: OrderedDict[str, Verdicts] = OrderedDict()
        """By filter key (the last `TABLES_KEPT`): each node context's verdict."""
        self.score_tables: OrderedDict[str, Verdicts] = OrderedDict()
        """By prioritize key (the last `TABLES_KEPT`): each node context's verdict."""
        self.ranges: dict[int, tuple[dict[NodeContext, float], dict[NodeContext, float]]] = {
            rule.slot: ({}, {}) for rule in self.node_only if rule.min_max
        }
        """By node-only MinMax score rule (its slot): each node context's raw value (as in its memo, `node_only`)
        twice, for the least (+inf for a node without one) and for the greatest (-inf): a range over the
        candidates is two C-level passes."""
        self.signatures: dict[tuple[int, ...], dict[NodeContext, int]] = {}
        """By the slots of some node-only filters (those of a filter key): each node context's signature, a
        number naming the outcomes they had on it; nodes with the same number had the same outcomes."""
        self._combinations: dict[tuple[NodeOutcome, ...], int] = {}
        self.projections: dict[int, dict[NodeContext, bytes]] = {}
        """By per-pod rule position: each node context's `projection` for it, interned.

        Only contexts that have a memo are in these tables: `keep` moves a context's entries to the newer
        context that replaces it when they hold for it, and drops them otherwise."""
        self._latest: dict[str, NodeContext] = {}
        """By node name, the context whose memo `memo_of` holds: replaced when a newer context comes."""

    def interned(self, value: H) -> H:
        """One object for equal values (sets of failed rules, say): a few per book, shared by every node."""
        if len(self._interned) >= INTERNED_KEPT:
            self._interned.clear()
        return self._interned.setdefault(value, value)  # type: ignore[return-value]  # the value kept for an equal one

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

    def bound(self, program: Program, rule: Rule, kind: str, request: PodRequest) -> Program | None:
        """`program` bound to the pod's values, compiled once per pod key; None if it cannot be bound."""
        key = (rule.position, kind, request.rule_key(rule))
        if key in self._bound:
            self._bound.move_to_end(key)
            return self._bound[key]
        work(WORK_BIND)
        names = rule.compiled.reads & PER_POD
        try:
            found: Program | None = program.bind({n: request.values.get(n, {}) for n in sorted(names)})
        except CelCompileError:
            found = None
        self._bound[key] = found
        while len(self._bound) > BOUND_KEPT:
            self._bound.popitem(last=False)
        return found

    def memos(self, nodes: Sequence[NodeContext]) -> tuple[list[NodeMemo], list[int]]:
        """The memo of each node, and the positions of those made now (their node-only results to compute).

        This runs for every candidate of every request: one dictionary lookup per node unless a memo is
        missing."""
        found: list[NodeMemo] = list(map(self.memo_of.get, nodes, itertools.repeat(NO_MEMO)))
        if NO_MEMO not in found:
            return found, []
        work(self.memo_work * found.count(NO_MEMO))
        fresh: list[int] = []
        for i, memo in enumerate(found):
            if memo is NO_MEMO:
                carried = self._carried(nodes[i])
                if carried is None or carried.carried is not None:
                    found[i] = carried or self.memo(nodes[i])
                    fresh.append(i)
                else:
                    found[i] = carried
        return found, fresh

    def _carried(self, node: NodeContext) -> NodeMemo | None:
        """What the memo of the node's previous context gives the new one, when the plan reads none of
        `pods`, `allocated`, `recent`: the memo itself when only the node's pods changed (its results
        hold), or a memo made again from it when only the metrics sample changed (`resampled`)."""
        previous = self._latest.get(node.name)
        if self.node_pods or previous is None:
            return None
        memo = self.memo_of.get(previous)
        if memo is None:
            return None
        change = previous.key.change(node.key)
        if change is Change.PODS:
            self.keep(node, memo)
            return memo
        return self.resampled(memo, node) if change is Change.SAMPLE else None

    def resampled(self, previous: NodeMemo, node: NodeContext) -> NodeMemo:
        """The node's memo after a new metrics sample: `previous`'s converted values, results and verdicts,
        but for `metrics` and what reads it. Filter verdicts are kept only when no filter reads `metrics`;
        prioritize verdicts never (a node's raw scores may have changed). Its node-only results are
        completed by the engine before it is kept."""
        values = dict(previous.values)
        engine = self.engine
        for name, read, paths in self.sample_values:
            values[name] = engine.convert(read(node) if paths is None else trim(read(node), paths))
        memo = NodeMemo(values)
        carried: list[NodeOutcome | None] = list(previous.node_only or ())
        for slot in self.sample_slots:
            carried[slot] = None
        memo.carried = carried
        positions = self.sample_positions
        memo.per_pod = {
            key: found
            for key, found in previous.per_pod.items()
            if not (isinstance(key, tuple) and key[0] in positions)
        }
        memo.resampled = True
        return memo

    def memo(self, node: NodeContext) -> NodeMemo:
        """A new memo of the node for this plan, its engine values converted; not kept until its node-only
        results are in (`keep`), so that a memo found is always complete."""
        engine = self.engine
        values = {
            name: engine.convert(read(node) if paths is None else trim(read(node), paths))
            for name, read, paths in self.node_values
        }
        for name in DERIVED:
            values[name] = engine.convert({})
        return NodeMemo(values)

    def keep(self, node: NodeContext, memo: NodeMemo) -> None:
        """Keep `memo` (its node-only results computed) as the node's, in place of its previous context's,
        whose filter verdicts the new context takes over when they hold for it: the same memo (only the
        node's pods changed), or one made again after a new sample that no filter reads."""
        previous = self._latest.get(node.name)
        if previous is not None and previous is not node:
            same = self.memo_of.pop(previous, None) is memo
            self._hand_over(previous, node, Change.PODS if same else Change.SAMPLE if memo.resampled else Change.OTHER)
        remember(self._latest, node.name, node, MEMOS_KEPT)
        self.memo_of[node] = memo
        results = memo.node_only or ()
        for slot, (low, high) in self.ranges.items():
            outcome = results[slot]
            raw = outcome.raw if isinstance(outcome, ScoreOutcome) else None
            low[node], high[node] = (math.inf, -math.inf) if raw is None else (raw, raw)
        while len(self.memo_of) > MEMOS_KEPT:  # `remember`, forgetting the oldest context's entries too
            oldest = next(iter(self.memo_of))
            del self.memo_of[oldest]
            self._hand_over(oldest, oldest, Change.OTHER)

    def _hand_over(self, previous: NodeContext, node: NodeContext, change: Change) -> None:
        """`previous`'s entries in the tables become `node`'s where they hold for it, and go otherwise: all
        of them for the same memo (`Change.PODS`: the plan reads none of the node's pods), what reads no
        `metrics` for a memo made again after a new sample (`Change.SAMPLE`), none for a memo made anew or
        forgotten. Raw values go always: `keep` puts the node's own."""
        same, resampled = change is Change.PODS, change is Change.SAMPLE
        for verdicts in self.filter_tables.values():
            verdicts.move(previous, node, same or (resampled and not self.filters_read_sample))
        for verdicts in self.score_tables.values():
            verdicts.move(previous, node, same)
        for position, table in self.projections.items():
            _move(table, previous, node, same or (resampled and position not in self.sample_positions))
        for signatures in self.signatures.values():
            _move(signatures, previous, node, same)
        for low, high in self.ranges.values():
            low.pop(previous, None)
            high.pop(previous, None)

    def signatures_of(
        self, slots: tuple[int, ...], nodes: Sequence[NodeContext], memos: Sequence[NodeMemo]
    ) -> list[int]:
        """Each node's signature for the node-only results in `slots` (its memo has them), made when missing."""
        table = self.signatures.get(slots)
        if table is None:
            if len(self.signatures) >= SIGNATURES_KEPT:
                self.signatures.clear()
            table = self.signatures[slots] = {}
        found: list[int | None] = list(map(table.get, nodes))
        if None in found:
            combinations = self._combinations
            for index, signature in enumerate(found):
                if signature is None:
                    results = memos[index].node_only or ()
                    outcomes = tuple(results[slot] for slot in slots)
                    signature = combinations.get(outcomes)
                    if signature is None:
                        if len(combinations) >= INTERNED_KEPT:  # numbers are never given twice: a combination
                            combinations.clear()  # met again gets a new one
                        signature = combinations[outcomes] = next(_signatures)
                    found[index] = table[nodes[index]] = signature
        return found  # type: ignore[return-value]  # every None replaced

    def filter_table(self, key: str) -> Verdicts:
        """The filter verdicts kept under `key` (made empty when there are none)."""
        return _table(self.filter_tables, key)

    def score_table(self, key: str) -> Verdicts:
        """The prioritize verdicts kept under `key` (made empty when there are none)."""
        return _table(self.score_tables, key)

    def key(self, *parts: Hashable) -> str:
        """A memo key: one string per distinct value (interned), so that a memo's last verdict is found
        by identity, and a dictionary lookup hashes it once (strings keep their hash)."""
        return self.interned(repr((self.token, *parts)))


class Verdicts(dict[NodeContext, NodeDecision]):
    """One key's verdicts, by node context, and what a Decision needs besides: the errors of the nodes that
    have some, and the filters each verdict failed. Looked up with `map(verdicts.get, nodes)`; a verdict
    is shared by the nodes that fare alike (filters), so the failed filters are counted per verdict."""

    __slots__ = ("errors", "failed")

    def __init__(self) -> None:
        super().__init__()
        self.errors: dict[NodeContext, Errors] = {}
        """The nodes whose verdicts have errors (rare): their errors."""
        self.failed: dict[int, FailedVerdict] = {}
        """By `id` of a verdict that failed filters: the verdict (kept alive, so the id stays its) and them."""

    def put_all(self, nodes: Sequence[NodeContext], verdicts: Sequence[NodeDecision], kinds: Iterable[Kind]) -> None:
        """Keep the verdicts of `nodes` (none kept yet), side by side; `kinds`: each distinct verdict with its
        errors and failed filters, after the index of a node that has it (a verdict with errors names its
        node: it is that node's alone)."""
        self.update(zip(nodes, verdicts, strict=True))
        for at, (verdict, errors, failed) in kinds:
            if errors:
                self.errors[nodes[at]] = errors
            if failed and id(verdict) not in self.failed:
                if len(self.failed) > 2 * len(self) + 64:  # verdicts no node has any more: keep those still had
                    kept = set(map(id, self.values()))
                    self.failed = {key: found for key, found in self.failed.items() if key in kept}
                self.failed[id(verdict)] = FailedVerdict(verdict, failed)

    def move(self, previous: NodeContext, node: NodeContext, holds: bool) -> None:
        """`previous`'s verdict, and its errors, become `node`'s when they `hold` for it; dropped either way."""
        if self.errors:
            _move(self.errors, previous, node, holds and previous in self)
        _move(self, previous, node, holds)


def _table(tables: OrderedDict[str, Verdicts], key: str) -> Verdicts:
    """The table kept under `key` in `tables`, made empty when there is none; the least recently used is
    dropped beyond `TABLES_KEPT`."""
    table = tables.get(key)
    if table is None:
        table = tables[key] = Verdicts()
        while len(tables) > TABLES_KEPT:
            tables.popitem(last=False)
    elif next(reversed(tables)) is not key:
        tables.move_to_end(key)
    return table


def _move(table: dict[NodeContext, V], previous: NodeContext, node: NodeContext, holds: bool) -> None:
    """`previous`'s entry in `table` becomes `node`'s when it `holds` for it; it is dropped either way."""
    found = table.pop(previous, None)
    if holds and found is not None:
        table[node] = found


NO_MEMO = NodeMemo({})
"""The memo of a node no plan has seen: it keeps nothing."""


def node_bindings(plan: Plan, memo: NodeMemo, *, keep: bool) -> object:
    """The node's engine bindings. Kept only when asked: cel-cpp's activation caches what it converts
    (about 8 KB a node), worth it for the nodes per-pod rules run on, not for every node in the cache."""
    if memo.bindings is not None:
        return memo.bindings
    made = plan.engine.bindings(memo.values)
    if keep:
        memo.bindings = made
    return made
