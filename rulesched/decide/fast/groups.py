"""Nodes that look alike to a per-pod rule (equal projections) form one group, evaluated once (`groups_of`)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, NamedTuple

from rulesched.decide.fast.budget import WORK_PROJECTION, work
from rulesched.decide.fast.keys import projection
from rulesched.decide.fast.memos import NodeMemo
from rulesched.decide.fast.plan import Plan
from rulesched.decide.fast.rule import Rule
from rulesched.rules.context import NodeContext


class Candidates(NamedTuple):
    """Candidate nodes and their memos, side by side."""

    nodes: Sequence[NodeContext]
    memos: Sequence[NodeMemo]

    def subset(self, indices: Sequence[int]) -> Candidates:
        return Candidates([self.nodes[i] for i in indices], [self.memos[i] for i in indices])


class Results(NamedTuple):
    """A program's results over some nodes, and the engine bindings each came from."""

    values: Sequence[Any]
    bindings: Sequence[Any]


class Grouped(NamedTuple):
    """A per-pod program's results by group of nodes that look the same to it: one evaluation a group."""

    groups: list[int]
    """Each node's group."""
    representatives: list[int]
    """Each group's node whose bindings it was evaluated with."""
    values: list[Any]
    bindings: list[Any]
    """Each group's result, and the bindings it came from."""
    full: bool
    """The bindings are full ones (node and pod), not the node's alone for a program bound to the pod."""

    def per_node(self) -> Results:
        return Results(
            list(map(self.values.__getitem__, self.groups)), list(map(self.bindings.__getitem__, self.groups))
        )


FEW_GROUPS = 16
"""Up to this many groups of alike nodes, a per-pod rule runs on full bindings instead of being bound to
the pod: binding compiles the expression again (about 0.4 ms), evaluating a group costs microseconds."""


def groups_of(plan: Plan, rule: Rule, candidates: Candidates) -> tuple[list[int], list[int]]:
    """Each node's group of nodes that look the same to `rule` (by their projections, kept by the plan), and
    each group's representative: beyond `FEW_GROUPS` (the program then runs on the representatives' own
    bindings), a node that keeps its bindings when there is one, so that no new ones are made."""
    nodes, memos = candidates
    keys = projections(plan, rule, nodes)
    indices = range(len(keys))
    representative = dict(zip(keys, indices, strict=True))
    if len(representative) > FEW_GROUPS:
        kept = list(map(operator.is_not, map(BINDINGS, memos), itertools.repeat(None)))
        representative.update(zip(itertools.compress(keys, kept), itertools.compress(indices, kept), strict=True))
    group_of = {key: group for group, key in enumerate(representative)}
    return list(map(group_of.__getitem__, keys)), list(representative.values())


def projections(plan: Plan, rule: Rule, nodes: Sequence[NodeContext]) -> list[bytes]:
    """Each node's projection for the per-pod `rule`, kept by the plan (made for those that have none yet):
    interned, so that equal projections are one object, compared by identity."""
    table = plan.caches.projections.setdefault(rule.position, {})
    keys: list[bytes | None] = list(map(table.get, nodes))
    if None in keys:
        work(WORK_PROJECTION * keys.count(None))
        for i, key in enumerate(keys):
            if key is None:
                keys[i] = table[nodes[i]] = plan.caches.interned(projection(rule, nodes[i]))
    return keys  # type: ignore[return-value]  # no None left


def full_bindings(plan: Plan, shared: Mapping[str, Any], memo: NodeMemo) -> Any:
    return plan.engine.bindings({**memo.values, **shared})


BINDINGS = attrgetter("bindings")
