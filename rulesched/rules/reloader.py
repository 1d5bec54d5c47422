"""Reloads the rule store when the rules directory changes, without a restart.

The directory is watched as a whole (watchfiles, recursively, nothing filtered), so a ConfigMap
volume's `..data` symlink swap, a plain edit, an added file and a deleted file all trigger a reload
after a short debounce. A reload is cheap when nothing changed (the content hash decides), so the
reloader also re-reads the directory every `interval` seconds in case a change notification was
lost (network filesystems, an editor's rename dance).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import watchfiles

from rulesched.rules.store import ReloadOutcome, RuleStore

log = logging.getLogger("rulesched.reload")

_RETRY_SECONDS = 2.0


class Reloader:
    """Watches `directory` and calls `store.reload()` on changes; run it with `run()` as a task."""

    def __init__(self, store: RuleStore, directory: Path, *, debounce: float = 0.5, interval: float = 60.0) -> None:
        self.store = store
        self.directory = directory
        self.debounce_ms = max(1, int(debounce * 1000))
        self.interval_ms = max(1000, int(interval * 1000))
        self.stop_event = asyncio.Event()

    async def run(self) -> None:
        """Watch until `stop()`; a directory that disappears is watched again once it returns."""
        while not self.stop_event.is_set():
            try:
                await self._watch()
            except (OSError, RuntimeError) as error:
                log.warning("cannot watch %s (%s); retrying", self.directory, error)
                await self._sleep(_RETRY_SECONDS)

    async def _watch(self) -> None:
        changes = watchfiles.awatch(
            self.directory,
            watch_filter=None,
            debounce=self.debounce_ms,
            step=min(50, self.debounce_ms),
            stop_event=self.stop_event,
            rust_timeout=self.interval_ms,
            yield_on_timeout=True,
        )
        async for _ in changes:
            await self.reload()

    async def reload(self) -> ReloadOutcome:
        """Reload now (off the event loop: compiling rules is CPU work)."""
        return await asyncio.to_thread(self.store.reload)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop_event.wait(), seconds)

    def stop(self) -> None:
        self.stop_event.set()
