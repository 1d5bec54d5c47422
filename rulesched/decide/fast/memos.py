"""What the plan keeps per node context (`NodeMemo`): its engine values and every result found for it; one per
node name (`MEMOS_KEPT`), replaced by the node's next context (`Caches.keep`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from rulesched.decide.fast.outcomes import NodeOutcome, ScoreOutcome
from rulesched.rules.cel import Engine

NODE_MEMO_KEPT = 8
"""Per node, how many pod keys keep their per-pod results."""

MEMOS_KEPT = 20_000
"""Node memos per plan: one per node name (a new context of a node replaces the memo of its previous
one), so this only bounds the names of nodes that went away; the oldest are forgotten first."""


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
    """A memo made again after a new metrics sample (`Caches.resampled`): the node-only results taken over
    from the previous memo, None for each rule that reads `metrics`, until they are complete (`node_only`)."""
    resampled: bool = False
    """Made by `Caches.resampled`: the filter verdicts of the previous memo hold when no filter reads `metrics`."""


NO_MEMO = NodeMemo({})
"""The memo of a node no plan has seen: it keeps nothing."""


def node_bindings(engine: Engine, memo: NodeMemo, *, keep: bool) -> object:
    """The node's engine bindings. Kept only when asked: cel-cpp's activation caches what it converts
    (about 8 KB a node), worth it for the nodes per-pod rules run on, not for every node in the cache."""
    if memo.bindings is not None:
        return memo.bindings
    made = engine.bindings(memo.values)
    if keep:
        memo.bindings = made
    return made
