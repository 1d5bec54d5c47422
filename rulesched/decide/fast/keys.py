"""What identifies a pod to a rule (`PodRequest.rule_key`) and a node to a rule (`projection`): exactly the fields
the rule reads (`trim`), so that pods or nodes alike there share results.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rulesched.decide.fast.rule import Rule
from rulesched.rules.cel.analysis import Path
from rulesched.rules.context import NodeContext

_PROJECTIONS = json.JSONEncoder(default=str)


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
