"""Which names changed after a generation: how a source tells the per-node caches what to rebuild."""

from __future__ import annotations

import threading
from collections import deque


class ChangeLog:
    """Which names changed after a generation: a counter, and the most recent changes.

    The request path reads a source through per-node caches that stay valid until the source says a
    node changed; this is how it says so without the reader comparing every node on every request.
    """

    def __init__(self, kept: int = 4096) -> None:
        self._generation = 0
        self._floor = 0
        """Changes after this generation are all in `_recent`."""
        self._recent: deque[tuple[int, str]] = deque()
        self._kept = kept
        self._lock = threading.Lock()

    def generation(self) -> int:
        return self._generation

    def record(self, name: str | None) -> None:
        """`name` changed; None: any node may have (a relist)."""
        with self._lock:
            self._generation += 1
            if name is None:
                self._recent.clear()
                self._floor = self._generation
                return
            self._recent.append((self._generation, name))
            if len(self._recent) > self._kept:
                self._floor = self._recent.popleft()[0]

    def since(self, generation: int) -> set[str] | None:
        with self._lock:
            if generation < self._floor:
                return None
            return {name for changed, name in self._recent if changed > generation}
