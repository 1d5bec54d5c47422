"""The rule store: the active RuleBook, swapped by one reference assignment, last good one kept.

A reload compiles the whole new set first; only a set that loads completely replaces the active
one, and a set whose content hash is unchanged is not a reload. A set that loads is then vetted before it
replaces an active book: an empty set is refused (unless `allow_empty`: a ConfigMap mounted wrong would let
every node pass), and each of the `vetters` (the server's reload canary) may refuse it with errors, as a
set that does not load is. A request reads `store.book` once and evaluates entirely with that book, so it
never sees a mix of two generations.
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

Vetter = Callable[[RuleBook], Sequence[LoadError]]
"""Looks at a book that loaded before it replaces the active one; the errors it returns refuse it."""

log = logging.getLogger("rulesched.rules")


@dataclass(frozen=True, slots=True)
class RejectedReload:
    """A rules change that did not load, kept for /rules and logs."""

    at: datetime.datetime
    errors: tuple[LoadError, ...]


class RuleStore:
    """Holds the active RuleBook for the server; `reload` is safe to call from any thread."""

    def __init__(self, paths: Sequence[Path], engine: Engine, *, allow_empty: bool = False) -> None:
        self.paths = list(paths)
        self.engine = engine
        self.allow_empty = allow_empty
        """Whether a reload may replace a book of rules with one of none."""
        self.book: RuleBook | None = None
        self.last_rejected: RejectedReload | None = None
        self.last_success: datetime.datetime | None = None
        self.listeners: list[Callable[[ReloadOutcome, RuleBook | None, RejectedReload | None], None]] = []
        self.vetters: list[Vetter] = []
        """Asked about each new book that would replace an active one (not the first: nothing is at stake)."""
        self._failing = False
        """The last reload was rejected (the next good one says so)."""
        self._recovered = False
        """The last reload was good after one or more rejected ones."""
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
            again = "; the rejected rules were fixed" if self._recovered else ""
            log.info(
                "rules loaded: generation %d, %d rule sets from %d files%s",
                book.generation,
                len(names),
                len(book.files),
                again,
                extra={"generation": book.generation, "hash": book.hash, "ruleSets": names, "files": list(book.files)},
            )
            for warning in book.warnings:
                log.warning("rules loaded with a warning: %s", warning, extra={"warning": warning.as_dict()})
            if not names:
                log.warning("no rules are active: every node passes every call (%s)", ", ".join(map(str, self.paths)))
        elif outcome == "rejected" and self.last_rejected is not None:
            errors = [str(e) for e in self.last_rejected.errors]
            kept = f"generation {self.book.generation} stays active" if self.book else "no rules are active"
            log.error("rules rejected (%s): %s", kept, "; ".join(errors), extra={"errors": errors})
        elif outcome == "unchanged" and self._recovered and self.book is not None:
            log.info("rules fixed: back to generation %d, which stayed active", self.book.generation)
        else:
            log.debug("rules unchanged")

    def _reload(self) -> ReloadOutcome:
        generation = self.book.generation + 1 if self.book else 1
        try:
            book = load_rule_book(self.paths, self.engine, generation=generation, active=self.book)
        except RulesLoadFailed as failure:
            return self._rejected(failure.errors)
        if self.book is not None and book.hash == self.book.hash:
            self._succeeded()
            return "unchanged"
        if self.book is not None:
            errors = self._vetted(book, self.book)
            if errors:
                return self._rejected(errors)
            book = replace(book, generation=generation)
        self._succeeded()
        self.book = book
        return "loaded"

    def _succeeded(self) -> None:
        self.last_success = datetime.datetime.now(datetime.UTC)
        self._recovered, self._failing = self._failing, False

    def _rejected(self, errors: Sequence[LoadError]) -> ReloadOutcome:
        self.last_rejected = RejectedReload(datetime.datetime.now(datetime.UTC), tuple(errors))
        self._failing, self._recovered = True, False
        return "rejected"

    def _vetted(self, book: RuleBook, active: RuleBook) -> Sequence[LoadError]:
        """Why `book` may not replace `active` (nothing: it may)."""
        if not book.rule_sets and active.rule_sets and not self.allow_empty:
            where = ", ".join(map(str, self.paths))
            message = (
                f"no rule sets in {where}: refused, it would let every node pass "
                "(remove the rules on purpose with --allow-empty-rules)"
            )
            return [LoadError(where, message)]
        for vetter in self.vetters:
            errors = vetter(book)
            if errors:
                return errors
        return ()
