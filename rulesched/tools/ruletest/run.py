"""Runs RuleTest suites: loads each suite's rules and snapshot, evaluates every case as the server does.

A suite whose rules, nodes or metrics cannot be used is an error as a whole; a case whose pod or own
snapshot cannot be used is an error on its own. Rule books are loaded once per (files, engine).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rulesched.cluster.pods.index import NamespaceSource, PodSource
from rulesched.cluster.sources import MetricsSource
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import EngineName, make_engine
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.tools.inputs import (
    InputError,
    Sources,
    decide,
    read_metrics,
    read_namespaces,
    read_nodes,
    read_pod,
    read_pods,
)
from rulesched.tools.ruletest.expect import actual_summary, compare
from rulesched.tools.ruletest.load import Suite, field_path
from rulesched.tools.ruletest.model import Case

Status = Literal["passed", "failed", "error"]
Nodes = list[Mapping[str, Any]]


class SuiteError(Exception):
    """A suite or case input that cannot be used; the message starts with file:line."""


@dataclass(slots=True)
class CaseResult:
    name: str
    location: str
    failures: list[str] = field(default_factory=list)
    actual: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def status(self) -> Status:
        return "error" if self.error else "failed" if self.failures else "passed"


@dataclass(slots=True)
class SuiteResult:
    name: str
    file: str
    engine: str
    cases: list[CaseResult] = field(default_factory=list)
    error: str | None = None

    def count(self, status: Status) -> int:
        return sum(1 for case in self.cases if case.status == status)


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: Nodes
    metrics: MetricsSource | None
    pods: PodSource | None = None
    namespaces: NamespaceSource | None = None


class Runner:
    """Runs suites with a default engine, caching rule books across suites."""

    def __init__(self, engine: EngineName) -> None:
        self.engine = engine
        self._books: dict[tuple[tuple[Path, ...], EngineName], RuleBook] = {}

    def book(self, suite: Suite, engine: EngineName) -> RuleBook:
        rules = suite.test.spec.rules
        paths = tuple(suite.base / p for p in ([rules] if isinstance(rules, str) else rules))
        key = (paths, engine)
        if key not in self._books:
            try:
                self._books[key] = load_rule_book(list(paths), make_engine(engine))
            except RulesLoadFailed as failure:
                details = "\n".join(f"  {e}" for e in failure.errors)
                raise SuiteError(f"{suite.location('spec', 'rules')}: the rules do not load:\n{details}") from failure
        return self._books[key]

    def run(self, suite: Suite) -> SuiteResult:
        spec = suite.test.spec
        engine = spec.celEngine or self.engine
        result = SuiteResult(suite.test.metadata.name, suite.document.file, engine)
        try:
            book = self.book(suite, engine)
            snapshot = Snapshot(
                _nodes(suite, spec.nodes, "spec"),
                _metrics(suite, spec.metrics, "spec"),
                _pods(suite, spec.pods, "spec"),
                _namespaces(suite, spec.namespaces, "spec"),
            )
        except SuiteError as error:
            result.error = str(error)
            return result
        result.cases = [run_case(suite, index, book, snapshot) for index in range(len(spec.cases))]
        return result


def _input(suite: Suite, loc: Sequence[str | int], error: InputError) -> SuiteError:
    return SuiteError(f"{suite.location(*loc)}: {field_path(loc)}: {error}")


def _nodes(suite: Suite, path: str, *loc: str | int) -> Nodes:
    try:
        return read_nodes(suite.base / path)
    except InputError as error:
        raise _input(suite, (*loc, "nodes"), error) from error


def _metrics(suite: Suite, path: str | None, *loc: str | int) -> MetricsSource | None:
    try:
        return read_metrics(suite.base / path if path else None)
    except InputError as error:
        raise _input(suite, (*loc, "metrics"), error) from error


def _pods(suite: Suite, path: str | None, *loc: str | int) -> PodSource | None:
    try:
        return read_pods(suite.base / path if path else None)
    except InputError as error:
        raise _input(suite, (*loc, "pods"), error) from error


def _namespaces(suite: Suite, path: str | None, *loc: str | int) -> NamespaceSource | None:
    try:
        return read_namespaces(suite.base / path if path else None)
    except InputError as error:
        raise _input(suite, (*loc, "namespaces"), error) from error


def _pod(suite: Suite, case: Case, index: int) -> Mapping[str, Any]:
    if isinstance(case.pod, dict):
        if not isinstance(case.pod.get("metadata"), dict):
            raise SuiteError(f"{suite.location('spec', 'cases', index, 'pod')}: the inline pod has no metadata")
        return case.pod
    try:
        return read_pod(suite.base / case.pod)
    except InputError as error:
        raise _input(suite, ("spec", "cases", index, "pod"), error) from error


def _case_snapshot(suite: Suite, case: Case, index: int, default: Snapshot) -> Snapshot:
    loc = ("spec", "cases", index)
    nodes = _nodes(suite, case.nodes, *loc) if case.nodes else default.nodes
    metrics = _metrics(suite, case.metrics, *loc) if case.metrics else default.metrics
    pods = _pods(suite, case.pods, *loc) if case.pods else default.pods
    namespaces = _namespaces(suite, case.namespaces, *loc) if case.namespaces else default.namespaces
    return Snapshot(nodes, metrics, pods, namespaces)


def _aware(now: datetime.datetime | None) -> datetime.datetime | None:
    """A `now` written without a zone is taken as UTC, as Kubernetes timestamps are."""
    return now.replace(tzinfo=datetime.UTC) if now is not None and now.tzinfo is None else now


def run_case(suite: Suite, index: int, book: RuleBook, default: Snapshot) -> CaseResult:
    """One case: its decision compared with its expectations."""
    case = suite.test.spec.cases[index]
    result = CaseResult(case.name, suite.location("spec", "cases", index))
    started = time.perf_counter()
    try:
        pod = _pod(suite, case, index)
        snapshot = _case_snapshot(suite, case, index, default)
    except SuiteError as error:
        result.error = str(error)
        return result
    sources = Sources(snapshot.metrics, snapshot.pods, snapshot.namespaces)
    decision = decide(book, pod, snapshot.nodes, sources, _aware(case.now), case.estimate)
    result.failures = compare(case.expect, decision)
    result.actual = actual_summary(decision) if result.failures else []
    result.seconds = time.perf_counter() - started
    return result
