"""Custom metric values per node (`metrics.custom`): the latest answer of each query, aged by its maxAge.

A query's answer maps a key to a number: the node's name, or an address of the node (node_exporter's
`instance` with its port dropped). A node's values are looked up by its name first, then by each of its
`status.addresses`. Answers are swapped whole by reference (readers take no lock); every key whose value
changed, appeared or went away is recorded in a change log, so that the names-mode contexts rebuild only
the nodes a poll touched. A query whose answer is older than its maxAge (its polls failing) loses all its
values at once, which the change log reports too.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rulesched.cluster.changelog import ChangeLog
from rulesched.rules.context import NO_CUSTOM, NodeCustom

CHANGES_KEPT = 16_384
"""Changed keys remembered; a reader further behind rebuilds every context (as after a metrics-server poll)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One query's latest values by key, when they were received and how long they count."""

    values: Mapping[str, float]
    at: float | None = None
    """POSIX seconds of the answer; None: taken as current (a metrics file), never ages."""
    max_age: float | None = None

    def expiry(self) -> float:
        return self.at + self.max_age if self.at is not None and self.max_age is not None else math.inf


class CustomValues:
    """The custom values of every query, read by node; written by the pollers (or once, from a file)."""

    def __init__(self, kept: int = CHANGES_KEPT) -> None:
        self._answers: dict[str, Answer] = {}
        self._changes = ChangeLog(kept)
        self._next_expiry = math.inf
        self._lock = threading.Lock()

    def update(self, query: str, answer: Answer) -> None:
        """`query`'s new answer replaces its old one; the keys whose value differs are recorded as changed."""
        with self._lock:
            old = self._answers.get(query)
            self._swap({**self._answers, query: answer})
            self._record(_changed(old.values if old else {}, answer.values))

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the answers of every query not in `keep` (a MetricSource change removed them)."""
        kept = set(keep)
        with self._lock:
            gone = [a for q, a in self._answers.items() if q not in kept]
            self._swap({q: a for q, a in self._answers.items() if q in kept})
            self._record({key for answer in gone for key in answer.values})

    def _swap(self, answers: dict[str, Answer]) -> None:
        # Values first: a reader that sees the new generation must not find the old values.
        self._answers = answers
        self._next_expiry = min((a.expiry() for a in answers.values() if a.values), default=math.inf)

    def _record(self, keys: set[str]) -> None:
        for key in keys:
            self._changes.record(key)

    def _sweep(self) -> None:
        """Answers past their maxAge lose their values (checked on reads: no timer thread)."""
        now = time.time()
        if now < self._next_expiry:
            return
        with self._lock:
            expired = {q: a for q, a in self._answers.items() if a.values and a.expiry() <= now}
            if expired:
                self._swap({**self._answers, **{q: Answer({}, a.at, a.max_age) for q, a in expired.items()}})
                self._record({key for answer in expired.values() for key in answer.values})

    def custom(self, name: str, addresses: Sequence[str] = ()) -> NodeCustom:
        """The node's fresh values, by query name; never blocks."""
        self._sweep()
        answers = self._answers
        if not answers:
            return NO_CUSTOM
        found: dict[str, float] = {}
        for query, answer in answers.items():
            value = _lookup(answer.values, name, addresses)
            if value is not None:
                found[query] = value
        return NodeCustom(found) if found else NO_CUSTOM

    def ages(self, name: str, addresses: Sequence[str] = ()) -> dict[str, float | None]:
        """Seconds since each of the node's values was received (None for a file's values)."""
        now = time.time()
        return {
            query: (max(0.0, now - answer.at) if answer.at is not None else None)
            for query, answer in self._answers.items()
            if _lookup(answer.values, name, addresses) is not None
        }

    def generation(self) -> int:
        """Grows whenever `custom` may answer differently for some key; never blocks for long."""
        self._sweep()
        return self._changes.generation()

    def changed_since(self, generation: int) -> set[str] | None:
        """The keys (node names or addresses) changed since `generation`; None: any may have."""
        return self._changes.since(generation)

    def size(self) -> int:
        """Values held, over every query."""
        return sum(len(a.values) for a in self._answers.values())


def _lookup(values: Mapping[str, float], name: str, addresses: Sequence[str]) -> float | None:
    value = values.get(name)
    if value is None:
        for address in addresses:
            value = values.get(address)
            if value is not None:
                break
    return value


def _changed(before: Mapping[str, float], after: Mapping[str, float]) -> set[str]:
    keys = before.keys() | after.keys()
    return {key for key in keys if before.get(key) != after.get(key)}


def file_values(items: Iterable[Mapping[str, object]]) -> CustomValues | None:
    """The custom values a metrics file's items carry (`custom: {cpu5m: 0.42}` beside `usage`), taken as
    current; None when no item carries any. Non-finite and non-numeric values are left out."""
    by_query: dict[str, dict[str, float]] = {}
    for item in items:
        metadata = item.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        custom = item.get("custom")
        if not isinstance(name, str) or not isinstance(custom, Mapping):
            continue
        for query, value in custom.items():
            number = _finite(value)
            if number is not None:
                by_query.setdefault(str(query), {})[name] = number
    if not by_query:
        return None
    values = CustomValues()
    for query, found in by_query.items():
        values.update(query, Answer(found))
    return values


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
