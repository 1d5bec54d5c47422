"""Warnings about rules that load but can never matter, for `rulesched check`.

- A score rule that reads nothing of the node (`node`, `metrics`, `allocatable`, including through
  the variables it uses) has the same value on every node, so it cannot rank them.
- A match condition that reads neither `pod` nor `now` is constant: the rule set applies to every
  pod or to none, whatever the condition says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rulesched.rules.book import RuleBook
from rulesched.rules.cel.analysis import reads
from rulesched.rules.compiled import CompiledRuleSet
from rulesched.rules.loader import Document, read_documents, rule_files
from rulesched.rules.vocabulary import MATCH_READS, NODE_DATA

POD_DATA = frozenset(MATCH_READS)
"""What differs from request to request, as match conditions may read it."""


@dataclass(frozen=True, slots=True)
class RuleWarning:
    """A rule that loads but can never matter, and where it is."""

    file: str
    line: int | None
    rule_set: str
    rule: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.rule_set}/{self.rule}: {self.message}"


def _documents(paths: Sequence[Path]) -> dict[str, Document]:
    """The document defining each rule set, for line numbers."""
    documents, _, _ = read_documents(rule_files(paths))
    found: dict[str, Document] = {}
    for document in documents:
        metadata = document.data.get("metadata") if isinstance(document.data, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if isinstance(name, str):
            found.setdefault(name, document)
    return found


def _constant_scores(rule_set: CompiledRuleSet, document: Document | None) -> list[RuleWarning]:
    warnings = []
    for index, rule in enumerate(rule_set.source.spec.scores):
        compiled = next((s for s in rule_set.scores if s.name == rule.name), None)
        if compiled is None or compiled.reads & NODE_DATA:
            continue
        line = document.line_of(("spec", "scores", index)) if document else None
        message = "score reads no node, metrics or allocatable data: it is the same on every node and cannot rank them"
        warnings.append(RuleWarning(rule_set.file, line, rule_set.name, rule.name, message))
    return warnings


def _constant_conditions(rule_set: CompiledRuleSet, document: Document | None) -> list[RuleWarning]:
    warnings = []
    for index, condition in enumerate(rule_set.source.spec.matchConditions):
        if reads(condition.expression).names & POD_DATA:
            continue
        line = document.line_of(("spec", "matchConditions", index)) if document else None
        message = (
            "match condition reads neither pod nor now: it is constant, so the rule set applies to all pods or none"
        )
        warnings.append(RuleWarning(rule_set.file, line, rule_set.name, condition.name, message))
    return warnings


def lint(book: RuleBook, paths: Sequence[Path]) -> list[RuleWarning]:
    """Every rule in `book` that can never matter, in rule set order."""
    documents = _documents(paths)
    warnings: list[RuleWarning] = []
    for rule_set in book.rule_sets:
        document = documents.get(rule_set.name)
        warnings += _constant_conditions(rule_set, document) + _constant_scores(rule_set, document)
    return warnings
