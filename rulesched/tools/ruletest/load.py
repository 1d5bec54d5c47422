"""Finds RuleTest documents under the given paths and validates them, with file:line for every problem.

Directories are searched recursively for `*.yaml` / `*.yml` (hidden entries skipped); documents of
other kinds (fixtures, rule sets) are skipped. A file named explicitly must hold a RuleTest. A file
that is not valid YAML is reported, since it may be a broken test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from rulesched.rules.loader import RULE_SUFFIXES, Document, read_documents
from rulesched.tools.ruletest.model import KIND, RuleTest

DEFAULT_PATH = Path("rules/tests")
"""Where `rulesched test` looks when given no path."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Something that keeps a test file (or a case) from running, and where it is."""

    file: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class Suite:
    """One valid RuleTest document, with its file for relative paths and its node tree for lines."""

    test: RuleTest
    document: Document
    path: Path

    @property
    def base(self) -> Path:
        return self.path.parent

    def location(self, *loc: str | int) -> str:
        line = self.document.line_of(loc)
        return f"{self.document.file}:{line}" if line else self.document.file


def discover(paths: Iterable[Path]) -> tuple[list[Path], list[Path], list[Problem]]:
    """(files named explicitly, files found in directories, paths that do not exist)."""
    named: list[Path] = []
    found: list[Path] = []
    missing: list[Problem] = []
    for path in paths:
        if path.is_dir():
            found += sorted(
                p
                for p in path.rglob("*")
                if p.suffix in RULE_SUFFIXES and p.is_file() and not _hidden(p.relative_to(path))
            )
        elif path.is_file():
            named.append(path)
        else:
            missing.append(Problem(str(path), "no such file or directory"))
    return named, found, missing


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def field_path(loc: Sequence[str | int]) -> str:
    """`("spec", "cases", 0, "pod")` as `spec.cases[0].pod`."""
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


def _validate(document: Document, path: Path) -> tuple[Suite | None, list[Problem]]:
    try:
        return Suite(RuleTest.model_validate(document.data), document, path), []
    except ValidationError as error:
        problems = [
            Problem(document.file, f"{field_path(item['loc'])}: {item['msg']}", document.line_of(item["loc"]))
            for item in error.errors()
        ]
        return None, problems


def _is_test(document: Document) -> bool:
    return isinstance(document.data, dict) and document.data.get("kind") == KIND


def load_file(path: Path, explicit: bool) -> tuple[list[Suite], list[Problem]]:
    """The RuleTest documents of one file and the problems met reading them."""
    documents, errors, _ = read_documents([(str(path), path)])
    problems = [Problem(e.file, e.message, e.line) for e in errors]
    tests = [d for d in documents if _is_test(d)]
    if explicit and not tests and not problems:
        problems.append(Problem(str(path), f"no {KIND} document in this file"))
    suites: list[Suite] = []
    for document in tests:
        suite, invalid = _validate(document, path)
        problems += invalid
        if suite is not None:
            suites.append(suite)
    return suites, problems


def load_tests(paths: Sequence[Path]) -> tuple[list[Suite], list[Problem]]:
    """Every RuleTest under `paths` (DEFAULT_PATH when empty), and every problem found."""
    named, found, problems = discover(paths or [DEFAULT_PATH])
    suites: list[Suite] = []
    for path in named + found:
        more, invalid = load_file(path, explicit=path in named)
        suites += more
        problems += invalid
    return suites, problems
