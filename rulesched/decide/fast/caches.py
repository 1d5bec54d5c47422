"""The caches of one rule book's plan (`Caches`): node memos, verdict tables, projections, ranges, signatures,
programs bound to a pod, applying rule sets, interned values, each with its bound (the `*_KEPT` constants) and
how a node's next context takes its entries over (`keep`); all dropped at once by `reset` (a deadline).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Protocol, TypeVar

from rulesched.decide.fast.budget import WORK_BIND, work
from rulesched.decide.fast.keys import PodRequest, trim
from rulesched.decide.fast.memos import MEMOS_KEPT, NO_MEMO, NodeMemo
from rulesched.decide.fast.outcomes import (
    Applying,
    NodeOutcome,
    ScoreOutcome,
)
from rulesched.decide.fast.rule import Rule, Values
from rulesched.decide.fast.tables import Verdicts, move, remember, table_in
from rulesched.rules.cel import CelCompileError, Engine, Program
from rulesched.rules.context import Change, NodeContext
from rulesched.rules.vocabulary import (
    DERIVED,
    PER_POD,
    NodeReader,
)

BOUND_KEPT = 256
"""Programs bound to a pod kept per plan (each a compiled expression: a few kilobytes)."""

APPLYING_KEPT = 1024
"""Pod keys whose applying rule sets are kept per plan."""

INTERNED_KEPT = 4096
"""Interned outcomes and memo keys per plan; the table is cleared when full."""

SIGNATURES_KEPT = 64
"""Node signature tables per plan: one per set of node-only filters a filter key runs (its rule sets')."""

_tokens = itertools.count(1)

_signatures = itertools.count(1)

H = TypeVar("H", bound=Hashable)


class Classified(Protocol):
    """What the caches read of their plan (`plan.Plan`)."""

    engine: Engine
    node_only: list[Rule]
    """The node-only rules, by slot."""
    node_pods: list[str]
    node_values: Values[NodeReader]
    sample_values: Values[NodeReader]
    sample_slots: list[int]
    sample_positions: frozenset[int]
    filters_read_sample: bool
    memo_work: float


class Caches:
    """What every call against a rule book keeps for the next: results by pod key and node context."""

    def __init__(self, plan: Classified) -> None:
        self.plan = plan
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
            rule.slot: ({}, {}) for rule in self.plan.node_only if rule.min_max
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
        work(self.plan.memo_work * found.count(NO_MEMO))
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
        if self.plan.node_pods or previous is None:
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
        engine = self.plan.engine
        for name, read, paths in self.plan.sample_values:
            values[name] = engine.convert(read(node) if paths is None else trim(read(node), paths))
        memo = NodeMemo(values)
        carried: list[NodeOutcome | None] = list(previous.node_only or ())
        for slot in self.plan.sample_slots:
            carried[slot] = None
        memo.carried = carried
        positions = self.plan.sample_positions
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
        engine = self.plan.engine
        values = {
            name: engine.convert(read(node) if paths is None else trim(read(node), paths))
            for name, read, paths in self.plan.node_values
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
            verdicts.move(previous, node, same or (resampled and not self.plan.filters_read_sample))
        for verdicts in self.score_tables.values():
            verdicts.move(previous, node, same)
        for position, table in self.projections.items():
            move(table, previous, node, same or (resampled and position not in self.plan.sample_positions))
        for signatures in self.signatures.values():
            move(signatures, previous, node, same)
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
        return table_in(self.filter_tables, key)

    def score_table(self, key: str) -> Verdicts:
        """The prioritize verdicts kept under `key` (made empty when there are none)."""
        return table_in(self.score_tables, key)

    def key(self, *parts: Hashable) -> str:
        """A memo key: one string per distinct value (interned), so that a memo's last verdict is found
        by identity, and a dictionary lookup hashes it once (strings keep their hash)."""
        return self.interned(repr((self.token, *parts)))
