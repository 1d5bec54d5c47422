"""A rule of the book as the fast path runs it: where it stands, what it reads, what its keys hold."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rulesched.rules.cel.analysis import Path
from rulesched.rules.compiled import CompiledFilter, CompiledScore, Paths
from rulesched.rules.vocabulary import NODE_SIDES, Name, NodeReader, RequestReader


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


def union_of(paths: Iterable[Paths], name: str) -> frozenset[Path]:
    return frozenset().union(*(p.get(name, frozenset()) for p in paths))


Reader = TypeVar("Reader", NodeReader, RequestReader)

Values = tuple[tuple[str, Reader, frozenset[Path] | None], ...]
"""Names, each with how its value is read and the fields read of it (None: all of it)."""


def values_read(read: Iterable[Name], sources: Sequence[Paths]) -> Values[Any]:
    """Each name of `read` with its reader, and the fields `sources` read of it when it is trimmed (else None)."""
    found = []
    for entry in read:
        reader = entry.read_node if entry.side in NODE_SIDES else entry.read_request
        assert reader is not None
        found.append((entry.name, reader, union_of(sources, entry.name) if entry.trimmed else None))
    return tuple(found)
