"""The verdict tables (`Verdicts`): one key's verdicts by node context, bounded (`TABLES_KEPT` keys), each moved to
a node's next context where it holds (`move`); and `remember`, the bounded dictionaries of the plan.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

from rulesched.decide.decision import NodeDecision
from rulesched.decide.fast.outcomes import Errors, FailedVerdict, Kind
from rulesched.rules.context import NodeContext

TABLES_KEPT = 8
"""Verdict tables kept per plan, for filter and for prioritize each: one per filter key (the applying rule
sets and the pod fields the filters read; filter verdicts are shared by the nodes that fare alike) or
prioritize key (the same, and each MinMax rule's range over the candidates), each holding a verdict per
node context."""

K = TypeVar("K", bound=Hashable)

V = TypeVar("V")


def remember(cache: dict[K, V], key: K, value: V, kept: int) -> V:
    """Store `value`, forgetting the oldest entries beyond `kept` (dicts keep insertion order)."""
    cache[key] = value
    while len(cache) > kept:
        del cache[next(iter(cache))]
    return value


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
            move(self.errors, previous, node, holds and previous in self)
        move(self, previous, node, holds)


def table_in(tables: OrderedDict[str, Verdicts], key: str) -> Verdicts:
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


def move(table: dict[NodeContext, V], previous: NodeContext, node: NodeContext, holds: bool) -> None:
    """`previous`'s entry in `table` becomes `node`'s when it `holds` for it; it is dropped either way."""
    found = table.pop(previous, None)
    if holds and found is not None:
        table[node] = found
