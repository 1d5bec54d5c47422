"""The rule store: the active RuleBook, swapped by one reference assignment, last good one kept.

A reload compiles the whole new set first; only a set that loads completely replaces the active
one, and a set whose content hash is unchanged is not a reload. A request reads `store.book` once
and evaluates entirely with that book, so it never sees a mix of two generations.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from rulesched.rules.book import RuleBook
from rulesched.rules.cel import Engine
from rulesched.rules.errors import LoadError, RulesLoadFailed
from rulesched.rules.loader import load_rule_book

ReloadOutcome = Literal["loaded", "unchanged", "rejected"]

log = logging.getLogger("rulesched.rules")


@dataclass(frozen=True, slots=True)
class RejectedReload:
    """A rules change that did not load, kept for /rules and logs."""

    at: datetime.datetime
    errors: tuple[LoadError, ...]


class RuleStore:
    """Holds the active RuleBook for the server; `reload` is safe to call from any thread."""

    def __init__(self, paths: Sequence[Path], engine: Engine) -> None:
        self.paths = list(paths)
        self.engine = engine
        self.book: RuleBook | None = None
        self.last_rejected: RejectedReload | None = None
        self.last_success: datetime.datetime | None = None
        self.listeners: list[Callable[[ReloadOutcome, RuleBook | None, RejectedReload | None], None]] = []
        self._lock = threading.Lock()

    def reload(self) -> ReloadOutcome:
        """Load the rules again; the active book changes only if the new set loads and differs."""
        with self._lock:
            outcome = self._reload()
        self._log(outcome)
        for listener in self.listeners:
            listener(outcome, self.book, self.last_rejected)
        return outcome

    def _log(self, outcome: ReloadOutcome) -> None:
        if outcome == "loaded" and self.book is not None:
            book = self.book
            names = [rs.name for rs in book.rule_sets]
            log.info(
                "rules loaded: generation %d, %d rule sets from %d files",
                book.generation,
                len(names),
                len(book.files),
                extra={"generation": book.generation, "hash": book.hash, "ruleSets": names, "files": list(book.files)},
            )
            for warning in book.warnings:
                log.warning("rules loaded with a warning: %s", warning, extra={"warning": warning.as_dict()})
        elif outcome == "rejected" and self.last_rejected is not None:
            errors = [str(e) for e in self.last_rejected.errors]
            kept = f"generation {self.book.generation} stays active" if self.book else "no rules are active"
            log.error("rules rejected (%s): %s", kept, "; ".join(errors), extra={"errors": errors})
        else:
            log.debug("rules unchanged")

    def _reload(self) -> ReloadOutcome:
        generation = self.book.generation + 1 if self.book else 1
        try:
            book = load_rule_book(self.paths, self.engine, generation=generation)
        except RulesLoadFailed as failure:
            self.last_rejected = RejectedReload(datetime.datetime.now(datetime.UTC), failure.errors)
            return "rejected"
        self.last_success = datetime.datetime.now(datetime.UTC)
        if self.book is not None and book.hash == self.book.hash:
            return "unchanged"
        if self.book is not None:
            book = replace(book, generation=generation)
        self.book = book
        return "loaded"
