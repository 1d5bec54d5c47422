"""`rulesched audit`: which running pods the rules put in violation, from files, as the server's audit does.

The pods of a PodList on the nodes of a NodeList, with a metrics file and a NamespaceList when given
(or the latest state a recording saw of each node), are audited through the server's own audit
(`controllers.audit.audit.audit_node`): the JSON is the same as `GET /audit`'s. In a rules pull request it
answers the question replay cannot: which pods already running would the new rules reject where they run (`--fail-on`).
"""

from __future__ import annotations

import datetime
import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rulesched.controllers.audit.audit import Violation, audit_node, audited_filters, counts, report
from rulesched.rules.book import RuleBook
from rulesched.rules.cel import EngineName, make_engine
from rulesched.rules.context import NodeContext
from rulesched.rules.loader import load_rule_book
from rulesched.rules.pod_values import namespace_name
from rulesched.tools.inputs import InputError, file_contexts, read_metrics, read_namespaces, read_nodes, read_pods
from rulesched.tools.recording_read import Recording, read_calls

FailOn = Literal["never", "enforce", "any"]
"""When `rulesched audit` exits 1: never, on an Enforce filter's violation (the default), or on any."""


@dataclass(frozen=True, slots=True)
class AuditInputs:
    """The files `rulesched audit` reads."""

    nodes: Path
    pods: Path
    metrics: Path | None = None
    namespaces: Path | None = None


@dataclass(frozen=True, slots=True)
class AuditResult:
    violations: list[Violation]
    nodes: int
    pods: int
    """Pods audited: those on the nodes given (pods on other nodes are not)."""


def audit_files(book: RuleBook, inputs: AuditInputs, now: datetime.datetime | None = None) -> AuditResult:
    """The violations of the pods in `inputs.pods` on the nodes of `inputs.nodes` (raises `InputError`)."""
    now = now or datetime.datetime.now(datetime.UTC)
    nodes = read_nodes(inputs.nodes)
    pods = read_pods(inputs.pods)
    if pods is None:
        raise InputError("audit needs --pods")
    contexts = file_contexts(read_metrics(inputs.metrics), pods)
    namespaces, audited = read_namespaces(inputs.namespaces), audited_filters(book)
    found: list[Violation] = []
    seen = 0
    for node in nodes:
        context = contexts.context(node)
        seen += len(context.pods.pods)
        found += audit_node(book, context, audited, namespaces, now)
    return AuditResult(sorted(found), len(nodes), seen)


def audit_recording(book: RuleBook, path: Path) -> AuditResult:
    """The violations in the latest state a recording saw of each node (its pods, metrics and labels), at the
    time of its last call; a pod's Namespace as last recorded (raises `RecordingError`)."""
    latest: dict[str, NodeContext] = {}
    namespaces: dict[str, Mapping[str, Any]] = {}
    now: datetime.datetime | None = None
    for call in read_calls(Recording(path)):
        latest.update((context.name, context) for context in call.contexts)
        if call.namespace is not None:
            namespaces[namespace_name(call.pod)] = call.namespace
        now = call.now
    audited, found = audited_filters(book), []
    for context in latest.values():
        found += audit_node(book, context, audited, namespaces, now or datetime.datetime.now(datetime.UTC))
    return AuditResult(sorted(found), len(latest), sum(len(c.pods.pods) for c in latest.values()))


def run_audit(rules: Sequence[Path], engine: EngineName, inputs: AuditInputs | Path) -> AuditResult:
    """Load the rules (raises `RulesLoadFailed`) and audit the files, or a recording."""
    book = load_rule_book(list(rules), make_engine(engine))
    return audit_recording(book, inputs) if isinstance(inputs, Path) else audit_files(book, inputs)


def failed(result: AuditResult, fail_on: FailOn) -> bool:
    """Whether the audit's findings fail the run."""
    if fail_on == "never":
        return False
    return any(v.enforce or fail_on == "any" for v in result.violations)


def render(result: AuditResult, output: str) -> str:
    """The result as printed: text, json (`GET /audit`'s shape) or junit (one test case per pod)."""
    if output == "json":
        answer = {"nodes": result.nodes, "pods": result.pods} | report(result.violations)
        return json.dumps(answer, indent=2, ensure_ascii=False) + "\n"
    if output == "junit":
        return junit(result)
    return text(result)


def text(result: AuditResult) -> str:
    lines = [f"{result.pods} pods on {result.nodes} nodes audited: {len(result.violations)} violations"]
    for count in counts(result.violations):
        lines.append(f"  {count['ruleSet']}/{count['rule']} ({count['mode']}): {count['pods']} pods")
    for v in result.violations:
        mode = "" if v.enforce else " [Audit mode]"
        lines.append(f"{v.namespace}/{v.pod} on {v.node}: rule {v.rule_set}/{v.rule}: {v.message}{mode}")
    return "\n".join(lines) + "\n"


def junit(result: AuditResult) -> str:
    """JUnit XML: one test case per violating pod and rule set, failed by its Enforce violations."""
    suite = ET.Element("testsuite", name="rulesched audit")
    by_case: dict[tuple[str, str, str], list[Violation]] = {}
    for v in result.violations:
        by_case.setdefault((v.namespace, v.pod, v.rule_set), []).append(v)
    failures = 0
    for (namespace, pod, rule_set), found in sorted(by_case.items()):
        case = ET.SubElement(suite, "testcase", classname=f"{namespace}/{pod}", name=rule_set)
        enforced = [v for v in found if v.enforce]
        if enforced:
            failures += 1
            element = ET.SubElement(case, "failure", message=_lines(enforced[:1]), type="violation")
            element.text = _lines(enforced)
        audit_only = [v for v in found if not v.enforce]
        if audit_only:
            ET.SubElement(case, "system-out").text = _lines(audit_only)
    suite.set("tests", str(len(by_case)))
    suite.set("failures", str(failures))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _lines(violations: Sequence[Violation]) -> str:
    return "\n".join(f"{v.rule_set}/{v.rule} on {v.node}: {v.message}" for v in violations)
