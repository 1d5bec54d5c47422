"""The node cache's negative cache: names the API did not return, not asked again for a while."""

from __future__ import annotations

import time


class NegativeCache:
    """Node names recently not found, each for `ttl` seconds (at most `kept` names: the oldest are
    forgotten first), and a pause of every lookup while the API fails. Thread-safe enough: each
    operation is a single dict or float update under the GIL."""

    def __init__(self, ttl: float, kept: int) -> None:
        self._ttl = ttl
        self._kept = kept
        self._until: dict[str, float] = {}
        self._paused_until = 0.0

    def holds(self, name: str) -> bool:
        """Whether `name` should not be looked up now."""
        if self._ttl <= 0:
            return False
        now = time.monotonic()
        if now < self._paused_until:
            return True
        until = self._until.get(name)
        if until is None:
            return False
        if now < until:
            return True
        self._until.pop(name, None)
        return False

    def add(self, name: str) -> None:
        if self._ttl <= 0:
            return
        self._until.pop(name, None)
        self._until[name] = time.monotonic() + self._ttl
        while len(self._until) > self._kept:
            self._until.pop(next(iter(self._until)), None)

    def pause(self, seconds: float) -> None:
        """No lookups for `max(seconds, ttl)`: the API just failed."""
        if self._ttl > 0:
            self._paused_until = time.monotonic() + max(seconds, self._ttl)

    def resume(self) -> None:
        """The API answers again (the watch says so): lookups may resume at once."""
        self._paused_until = 0.0
