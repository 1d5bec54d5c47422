"""How the fast engine evaluates one RuleBook: what each rule depends on, and the caches that follow.

DESIGN.md §4. A rule reading only `node`, `metrics` and `allocatable` (node-only) has one result per
node version and rule book, computed the first time the node is a candidate and kept in the
NodeContext. A rule reading `pod`, `requests` or `now` (per pod) is evaluated per pod, memoized by a
key made of exactly the pod fields the book's rules read, so replicas of a workload are lookups. Each
node's engine values are converted once per version, trimmed to the node fields the rules read, and
per-pod rules are bound to the pod (`Program.bind`) so that these per-node values serve every pod.
Nodes that look the same to a per-pod rule (equal projections: the same zone label, say) share one
evaluation, so a pod never seen before costs one evaluation per distinct projection, not per node.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, TypeVar

from rulesched.rules.book import CompiledFilter, CompiledScore, Paths, RuleBook
from rulesched.rules.cel import CelCompileError, Program
from rulesched.rules.cel.analysis import Path
from rulesched.rules.context import NodeContext, namespace_view, pod_requests

PER_POD = frozenset({"pod", "requests", "now", "namespaceObject"})
"""Context names whose values change with the pod or the request."""
NODE_PODS = ("pods", "allocated", "recent")
"""Context names that change with the pods on the node: node-side values, like `metrics`, kept in the
node's context and rebuilt when a pod event touches that node only."""

_PLANS_KEPT = 8
_BOUND_KEPT = 256
"""Bound programs kept (each a compiled expression: a few kilobytes)."""
APPLYING_KEPT = 1024
"""Pod keys whose applying rule sets are kept."""
NODE_MEMO_KEPT = 8
_INTERNED_KEPT = 4096
"""Per node, how many pod keys (or candidate ranges) keep their verdicts and results."""

_tokens = itertools.count(1)
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


@dataclass(slots=True, eq=False)
class NodeMemo:
    """What one NodeContext keeps for one plan: its engine values and every result found for it.

    Compared by identity, like the contexts that hold them."""

    token: int
    values: Mapping[str, Any]
    bindings: Any = None
    """Engine bindings of `values`, kept once a per-pod rule has run on this node (see `node_bindings`)."""
    node_only: list[Any] | None = None
    per_pod: dict[Hashable, Any] = field(default_factory=dict)
    decisions: dict[Hashable, Any] = field(default_factory=dict)
    """Filter verdicts by key (the last `NODE_MEMO_KEPT`)."""
    scorings: dict[Hashable, Any] = field(default_factory=dict)
    """Prioritize verdicts by key (the last `NODE_MEMO_KEPT`)."""
    projections: dict[int, bytes] = field(default_factory=dict)
    """By rule position: the node's values that per-pod rule reads, as a key."""
    filter_key: str = ""
    filtered: Any = None
    """The last filter verdict kept, and its key: most calls ask for the same one again (replicas, or
    new pods with the same read fields), found here without a lookup in `decisions`."""
    score_key: str = ""
    scored: Any = None
    """The same for the last prioritize verdict."""
    pod_free: bool = False
    """The plan reads none of `pods`, `allocated`, `recent`: the memo stays right when only the node's pods
    change, and a rebuilt context of the same node object and metrics sample takes it over."""
    previous: NodeMemo | None = None
    """Set on a placeholder only (`after_new_sample`): the memo of the same node object before its metrics
    sample changed, from which the plan makes this node's memo again, computing only what reads `metrics`."""
    carried: list[Any] | None = None
    """Node-only results taken over from `previous`, None for each rule that reads `metrics`; until the
    node-only results are complete (`node_only`)."""


def after_new_sample(memo: NodeMemo | None) -> NodeMemo | None:
    """The memo for the new context of the same node object with a new metrics sample (and the same pods):
    a placeholder the plan completes (`Plan.memo`) from what does not read `metrics`, or None when nothing
    can be kept (no memo, or the plan reads the node's pods, whose `recent` follows the sample's time)."""
    if memo is not None and memo.previous is not None:
        memo = memo.previous  # a placeholder never completed: keep the memo it came from
    if memo is None or not memo.pod_free or memo.node_only is None:
        return None
    return NodeMemo(0, {}, previous=memo)


@dataclass(frozen=True, slots=True)
class PodRequest:
    """The per-pod side of one evaluation: plain values to bind, and the key that identifies them."""

    values: Mapping[str, Any]
    key: bytes
    now: datetime.datetime

    def key_for(self, reads_now: bool) -> Hashable:
        return (self.key, self.now) if reads_now else self.key


class NeedsEvaluationError(Exception):
    """Raised under `lookups_only()` where an evaluation would have to compute something."""


class _Mode(threading.local):
    lookups_only: bool = False


_mode = _Mode()


@contextlib.contextmanager
def lookups_only() -> Iterator[None]:
    """Evaluations in this block may only read what the caches hold: at the first thing to compute (a
    memo to build, a rule to run) they raise `NeedsEvaluationError` before changing any cache. The
    extender answers such calls on its event loop, and runs the others in its evaluation thread."""
    _mode.lookups_only = True
    try:
        yield
    finally:
        _mode.lookups_only = False


def work() -> None:
    """Called where an evaluation is about to compute: raises under `lookups_only()`."""
    if _mode.lookups_only:
        raise NeedsEvaluationError


def remember(cache: dict[K, V], key: K, value: V, kept: int) -> V:
    """Store `value`, forgetting the oldest entries beyond `kept` (dicts keep insertion order)."""
    cache[key] = value
    while len(cache) > kept:
        del cache[next(iter(cache))]
    return value


def trim(value: Any, paths: Iterable[Path]) -> Any:
    """`value` keeping only what the field `paths` reach; anything not a map is kept whole."""
    selected = list(paths)
    if () in selected or not isinstance(value, Mapping):
        return value
    by_field: dict[str, list[Path]] = {}
    for path in selected:
        by_field.setdefault(path[0], []).append(path[1:])
    return {name: trim(value[name], rest) for name, rest in by_field.items() if name in value}


def projection(rule: Rule, node: NodeContext) -> bytes:
    """Exactly the node-side values `rule` reads, as bytes: nodes with equal projections get equal results.

    Key order is kept (not sorted): a rule iterating a map sees its order."""
    read = rule.compiled.paths
    pods = node.pods
    values = [
        trim(v, read[n]) if n in read else None
        for n, v in (
            ("node", node.node),
            ("metrics", node.metrics),
            ("allocatable", node.allocatable),
            ("pods", pods.pods),
            ("allocated", pods.allocated),
            ("recent", pods.recent),
        )
    ]
    return json.dumps(values, default=str).encode()


def _union(paths: Iterable[Paths], name: str) -> frozenset[Path]:
    return frozenset().union(*(p.get(name, frozenset()) for p in paths))


class Plan:
    """The book's rules classified, with the caches shared by every request against this book."""

    def __init__(self, book: RuleBook) -> None:
        self.book = book
        self.token = next(_tokens)
        self.filters: list[list[Rule]] = []
        self.scores: list[list[Rule]] = []
        self.node_only: list[Rule] = []
        positions = itertools.count()
        for rule_set in book.rule_sets:
            self.filters.append([self._rule(next(positions), rule_set.name, f) for f in rule_set.filters])
        for rule_set in book.rule_sets:
            self.scores.append([self._rule(next(positions), rule_set.name, s) for s in rule_set.scores])
        rules = [r.compiled for group in (*self.filters, *self.scores) for r in group]
        per_pod = [r.compiled for group in (*self.filters, *self.scores) for r in group if r.per_pod]
        conditions = [c for rs in book.rule_sets for c in rs.conditions]
        self.node_paths = _union((r.paths for r in rules), "node")
        self.pod_paths = _union([*(r.paths for r in per_pod), *(c.paths for c in conditions)], "pod")
        self.namespace_paths = _union([*(r.paths for r in per_pod), *(c.paths for c in conditions)], "namespaceObject")
        self.reads_namespace = any("namespaceObject" in r.reads for r in per_pod) or any(
            "namespaceObject" in c.paths for c in conditions
        )
        self.node_pods = [n for n in NODE_PODS if any(n in r.reads for r in rules)]
        """The pod-dependent node names the book reads: only those are converted for the engine."""
        self.reads_requests = any("requests" in r.reads for r in per_pod)
        self.sample_slots = [r.slot for r in self.node_only if "metrics" in r.compiled.reads]
        """Node-only rules that read `metrics`: computed again when a node's metrics sample changes."""
        self.sample_positions = frozenset(
            r.position for group in (*self.filters, *self.scores) for r in group if "metrics" in r.compiled.reads
        )
        self.filters_read_sample = any("metrics" in r.compiled.reads for group in self.filters for r in group)
        self.conditions_read_now = any("now" in c.paths for c in conditions)
        self._bound: OrderedDict[Hashable, Program | None] = OrderedDict()
        self.applying: dict[Hashable, Any] = {}
        self._interned: dict[Hashable, Any] = {}

    def interned(self, value: H) -> H:
        """One object for equal values (sets of failed rules, say): a few per book, shared by every node."""
        if len(self._interned) >= _INTERNED_KEPT:
            self._interned.clear()
        return self._interned.setdefault(value, value)  # type: ignore[no-any-return]

    def _rule(self, position: int, rule_set: str, compiled: CompiledFilter | CompiledScore) -> Rule:
        per_pod = bool(compiled.reads & PER_POD)
        rule = Rule(
            position, rule_set, compiled, per_pod, "now" in compiled.reads, -1 if per_pod else len(self.node_only)
        )
        if not per_pod:
            self.node_only.append(rule)
        return rule

    def request(
        self, pod: Mapping[str, Any], now: datetime.datetime, namespace: Mapping[str, Any] | None = None
    ) -> PodRequest:
        """The pod's trimmed values and their key (the same for every replica of a workload)."""
        trimmed = trim(pod, self.pod_paths) if self.pod_paths else {}
        values: dict[str, Any] = {"pod": trimmed, "now": now}
        if self.reads_requests:
            values["requests"] = pod_requests(pod)
        if self.reads_namespace:
            view = namespace_view(pod, namespace)
            values["namespaceObject"] = trim(view, self.namespace_paths) if self.namespace_paths else view
        parts = [trimmed, values.get("requests"), values.get("namespaceObject")]
        key = json.dumps(parts, sort_keys=True, default=str).encode()
        return PodRequest(values, key, now)

    def bound(self, program: Program, rule: Rule, kind: str, request: PodRequest) -> Program | None:
        """`program` bound to the pod's values, compiled once per pod key; None if it cannot be bound."""
        key = (rule.position, kind, request.key_for(rule.reads_now))
        if key in self._bound:
            self._bound.move_to_end(key)
            return self._bound[key]
        work()
        names = rule.compiled.reads & PER_POD
        try:
            found: Program | None = program.bind({n: request.values.get(n, {}) for n in sorted(names)})
        except CelCompileError:
            found = None
        self._bound[key] = found
        while len(self._bound) > _BOUND_KEPT:
            self._bound.popitem(last=False)
        return found

    def memos(self, nodes: Sequence[NodeContext]) -> tuple[list[NodeMemo], list[int]]:
        """The memo of each node, and the positions of those made now (their node-only results to compute).

        A node keeps the memo of the latest plan that saw it; this runs for every candidate of every
        request, so it is one attribute read per node unless a memo is missing or from another plan."""
        token = self.token
        found: list[NodeMemo] = [node.memo or NO_MEMO for node in nodes]
        if set(map(_TOKEN, found)) == {token}:
            return found, []
        work()
        fresh = [i for i, memo in enumerate(found) if memo.token != token]
        for i in fresh:
            found[i] = self.memo(nodes[i])
        return found, fresh

    def memo(self, node: NodeContext) -> NodeMemo:
        """A new memo of the node for this plan, its engine values converted; not stored in the node until
        its node-only results are in (`keep`), so that a memo found in a node is always complete."""
        placeholder = node.memo
        if placeholder is not None and placeholder.previous is not None and placeholder.previous.token == self.token:
            return self._after_new_sample(placeholder.previous, node)
        engine = self.book.engine
        values = {
            "node": engine.convert(trim(node.node, self.node_paths) if self.node_paths else {}),
            "metrics": engine.convert(node.metrics),
            "allocatable": engine.convert(node.allocatable),
            "variables": engine.convert({}),
        }
        for name in self.node_pods:  # the others are left out: rules that do not read them pay nothing
            value = getattr(node.pods, name)
            values[name] = engine.convert(list(value) if isinstance(value, tuple) else value)
        return NodeMemo(self.token, values, pod_free=not self.node_pods)

    def _after_new_sample(self, previous: NodeMemo, node: NodeContext) -> NodeMemo:
        """The node's memo after a new metrics sample: `previous`'s converted values, results and verdicts,
        but for `metrics` and what reads it. Filter verdicts are kept only when no filter reads `metrics`;
        prioritize verdicts never (a node's raw scores may have changed)."""
        values = dict(previous.values)
        values["metrics"] = self.book.engine.convert(node.metrics)
        memo = NodeMemo(self.token, values, pod_free=previous.pod_free)
        carried = list(previous.node_only or ())
        for slot in self.sample_slots:
            carried[slot] = None
        memo.carried = carried
        positions = self.sample_positions
        memo.per_pod = {
            key: found
            for key, found in previous.per_pod.items()
            if not (isinstance(key, tuple) and key[0] in positions)
        }
        memo.projections = {key: found for key, found in previous.projections.items() if key not in positions}
        if not self.filters_read_sample:
            memo.decisions = dict(previous.decisions)
            memo.filter_key, memo.filtered = previous.filter_key, previous.filtered
        return memo

    def keep(self, node: NodeContext, memo: NodeMemo) -> None:
        """Store `memo` (its node-only results computed) in the node, replacing another plan's."""
        object.__setattr__(node, "memo", memo)  # the context's one mutable field (frozen otherwise)

    def key(self, *parts: Hashable) -> str:
        """A memo key: one string per distinct value (interned), so that a memo's last verdict is found
        by identity, and a dictionary lookup hashes it once (strings keep their hash)."""
        return self.interned(repr((self.token, *parts)))


NO_MEMO = NodeMemo(0, {})
"""The memo of a node no plan has seen: it keeps nothing."""
_TOKEN = attrgetter("token")


def node_bindings(plan: Plan, memo: NodeMemo, *, keep: bool) -> Any:
    """The node's engine bindings. Kept only when asked: cel-cpp's activation caches what it converts
    (about 8 KB a node), worth it for the nodes per-pod rules run on, not for every node in the cache."""
    if memo.bindings is not None:
        return memo.bindings
    made = plan.book.engine.bindings(memo.values)
    if keep:
        memo.bindings = made
    return made


_plans: OrderedDict[int, Plan] = OrderedDict()
_lock = threading.Lock()


def plan_for(book: RuleBook) -> Plan:
    """The plan of `book`, made once; a plan holds its book, so the id cannot be reused meanwhile."""
    with _lock:
        plan = _plans.get(id(book))
        if plan is not None and plan.book is book:
            _plans.move_to_end(id(book))
            return plan
        plan = Plan(book)
        _plans[id(book)] = plan
        while len(_plans) > _PLANS_KEPT:
            _plans.popitem(last=False)
        return plan


def forget(book: RuleBook) -> None:
    """Drop the plan of `book` and its caches (results cut short by a deadline must not be reused): the
    next request makes a new plan, with a new token, so node memos of this one are ignored."""
    with _lock:
        plan = _plans.get(id(book))
        if plan is not None and plan.book is book:
            del _plans[id(book)]
