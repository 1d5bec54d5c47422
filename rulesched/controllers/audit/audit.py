"""The audit of running pods: each assigned pod's applying filters, evaluated against the node it runs on.

A rule decides where a pod starts; the audit asks whether the rules in force now would still let it run
where it is. A violation is (pod, node, rule set, rule, message): a filter of a rule set that applies to
the pod is false on the pod's own node. Filters with `mode: Audit` are reported apart (`enforce` false);
a rule set or a filter with `audit: false` is not audited at all (it matters at placement only). An
evaluation error is not a violation: nothing is reported, let alone evicted, on a rule that cannot say.

What the audit sees of a pod is what the pod cache keeps (`rules.pod_values.pod_view`): its metadata, a few
spec fields and its requests; a filter that reads other pod fields sees them absent. The node's pods are
the others on it, as at placement: `allocated` does not count the audited pod twice.

The server's continuous audit (`controllers/audit/auditor.py`) and `rulesched audit` (`tools/audit.py`) both go
through `audit_node`, so they report the same violations for the same inputs.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rulesched.decide.decision import Decision, FilterResult
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext, with_pods
from rulesched.rules.pod_values import namespace_name, pod_identity

Audited = frozenset[tuple[str, str]]
"""The (rule set, filter) pairs the audit evaluates."""


class Namespaces(Protocol):
    """Where a pod's Namespace is found (`namespaceObject`): a namespace source, or a plain dictionary."""

    def get(self, name: str, /) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, slots=True, order=True)
class Violation:
    """A running pod that a filter of the rules in force rejects on its own node."""

    namespace: str
    pod: str
    rule_set: str
    rule: str
    node: str
    message: str
    enforce: bool = True
    """False: the filter is in `mode: Audit` (reported apart; it never rejects, nor evicts)."""
    uid: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "pod": self.pod,
            "uid": self.uid,
            "node": self.node,
            "ruleSet": self.rule_set,
            "rule": self.rule,
            "mode": "Enforce" if self.enforce else "Audit",
            "message": self.message,
        }


def filter_decision(
    book: RuleBook,
    pod: Mapping[str, Any],
    contexts: Sequence[NodeContext],
    *,
    namespace: Mapping[str, Any] | None,
    now: datetime.datetime,
) -> Decision:
    """The filters' Decision for `pod` over `contexts`: the audit's and the descheduler's one call into the engine."""
    return evaluate(prepared(book), Call(pod, contexts, Verb.FILTER, now, None, namespace, distinct=True))


def evaluate_filters(
    book: RuleBook,
    pod: Mapping[str, Any],
    context: NodeContext,
    *,
    namespace: Mapping[str, Any] | None,
    now: datetime.datetime,
) -> list[FilterResult]:
    """Each applying filter's outcome for `pod` on one node."""
    verdict = filter_decision(book, pod, [context], namespace=namespace, now=now).nodes.get(context.name)
    return list(verdict.filters) if verdict is not None else []


def passing_nodes(
    book: RuleBook,
    pod: Mapping[str, Any],
    contexts: Sequence[NodeContext],
    *,
    namespace: Mapping[str, Any] | None,
    now: datetime.datetime,
) -> list[str]:
    """The nodes of `contexts` where every applying filter passes `pod` now (the descheduler's anti-loop check)."""
    return list(filter_decision(book, pod, contexts, namespace=namespace, now=now).passed)


def audited_filters(book: RuleBook) -> Audited:
    """The filters the audit evaluates: every filter but those of a rule set or filter with `audit: false`."""
    found: set[tuple[str, str]] = set()
    for rule_set in book.rule_sets:
        spec = rule_set.source.spec
        if spec.audit:
            found.update((rule_set.name, f.name) for f in spec.filters if f.audit)
    return frozenset(found)


def pod_of(view: Mapping[str, Any]) -> dict[str, Any]:
    """A pod to evaluate from the pod cache's view of it: its requests as one container's, so that
    `requests` reads the same as for the pod itself."""
    requests = {name: repr(value) for name, value in (view.get("requests") or {}).items()}
    container = {"name": "requests", "resources": {"requests": requests}}
    spec = {**(view.get("spec") or {}), "containers": [container]}
    return {"metadata": dict(view.get("metadata") or {}), "spec": spec}


def audit_pod(
    book: RuleBook,
    view: Mapping[str, Any],
    context: NodeContext,
    audited: Audited,
    *,
    namespace: Mapping[str, Any] | None,
    now: datetime.datetime,
) -> list[Violation]:
    """The violations of one pod (a pod cache view) on its node's context."""
    identity = pod_identity(view)
    alone = context
    if prepared(book).node_pods and identity["uid"]:  # the node's pods without this one, as when it was placed
        alone = with_pods(context, context.pods.without({identity["uid"]}))
    results = evaluate_filters(book, pod_of(view), alone, namespace=namespace, now=now)
    return [
        Violation(
            identity["namespace"],
            identity["name"],
            result.rule_set,
            result.rule,
            context.name,
            result.message or f"failed {result.rule}",
            result.enforce,
            identity["uid"],
        )
        for result in results
        if result.outcome == "fail" and (result.rule_set, result.rule) in audited
    ]


def audit_node(
    book: RuleBook,
    context: NodeContext,
    audited: Audited,
    namespaces: Namespaces | None,
    now: datetime.datetime,
) -> list[Violation]:
    """The violations of every pod the context counts on its node, sorted."""
    found: list[Violation] = []
    if not audited:
        return found
    for view in context.pods.pods:
        namespace = namespaces.get(namespace_name(view)) if namespaces is not None else None
        found += audit_pod(book, view, context, audited, namespace=namespace, now=now)
    return sorted(found)


def counts(violations: Iterable[Violation]) -> list[dict[str, Any]]:
    """Violating pods per rule (rule set, rule, mode), most first."""
    counted = Counter((v.rule_set, v.rule, v.enforce) for v in violations)
    ordered = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    return [
        {"ruleSet": rs, "rule": rule, "mode": "Enforce" if enforce else "Audit", "pods": count}
        for (rs, rule, enforce), count in ordered
    ]


def report(violations: Sequence[Violation], *, offset: int = 0, limit: int | None = None) -> dict[str, Any]:
    """The audit's JSON: counts per rule, then the violations (sorted) from `offset`, at most `limit`."""
    ordered = sorted(violations)
    end = len(ordered) if limit is None else min(len(ordered), offset + limit)
    page = ordered[offset:end]
    return {
        "counts": counts(ordered),
        "total": len(ordered),
        "offset": offset,
        "next": end if end < len(ordered) else None,
        "violations": [v.as_dict() for v in page],
    }
