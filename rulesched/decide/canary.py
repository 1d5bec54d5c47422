"""The canary: a rule book tried on a sample of pods over the current nodes, to find the rules that cannot work.

A rule can load and still be useless everywhere: a filter that reads a label no node has fails on every node,
and with `failurePolicy: Fail` no pod can be scheduled. The canary evaluates the book the way a call is
evaluated (`evaluate`, the verb `explain`: the filters, then the scores of the nodes that pass) for each
sampled pod, and names each rule that, for every sampled pod it applies to, errored on every node it was
evaluated on, and each enforced filter that rejected every node. A rule that reads what a call has no data
for (`metrics` when no node has a sample, `namespaceObject` when the pod's Namespace is unknown) is not judged
on that call. The server runs it before a reload replaces the active book (`--reload-canary`); `rulesched
check --nodes` runs it offline.

It stops at its deadline: a pod whose call was cut short is not counted, so a rule is only named on the
evidence of complete evaluations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from rulesched.decide.decision import Decision
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.errors import LoadError

STAND_IN_POD: Mapping[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "rulesched-canary", "namespace": "default", "uid": "rulesched-canary"},
    "spec": {"containers": [{"name": "main", "image": "canary"}]},
}
"""The pod tried when no pod is sampled: a rule that fails whatever the pod is still fails for it."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule that did nothing but fail, or rejected every node, for every sampled pod it applies to."""

    file: str
    rule_set: str
    rule: str
    what: str

    def error(self) -> LoadError:
        return LoadError(self.file, f"refused by the canary: {self.what}", rule_set=self.rule_set, rule=self.rule)

    def __str__(self) -> str:
        return str(self.error())


class Verdict(NamedTuple):
    """The rules found, and how many pods were tried completely (0: no evidence either way)."""

    findings: list[Finding]
    tried: int


@dataclass(slots=True)
class _Tally:
    """One rule over the pods tried: how many it applied to, errored on, rejected every node for."""

    applied: int = 0
    errored: int = 0
    rejected: int = 0
    first_error: str = ""


def trials(
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[NodeContext],
    namespace: Callable[[Mapping[str, Any]], Mapping[str, Any] | None],
) -> list[Call]:
    """A call for each of `pods` over `nodes` (the stand-in pod when there are none), each with its Namespace."""
    names = [n.name for n in nodes]
    return [Call(pod, nodes, namespace=namespace(pod), names=names) for pod in pods or [STAND_IN_POD]]


def canary(book: RuleBook, calls: Iterable[Call], deadline: float) -> Verdict:
    """The rules of `book` that cannot work, from `calls` evaluated with it (as `explain`) until `deadline`
    (a `time.monotonic()` value); a call without nodes tells nothing and is passed over."""
    plan = prepared(book)
    reads = {(rs.name, f.name): f.reads for rs in book.rule_sets for f in rs.filters}
    reads |= {(rs.name, s.name): s.reads for rs in book.rule_sets for s in rs.scores}
    tallies: dict[tuple[str, str], _Tally] = {}
    tried = 0
    for call in calls:
        if time.monotonic() >= deadline:
            break
        if not call.nodes:
            continue
        decision = evaluate(plan, call._replace(verb=Verb.EXPLAIN, deadline=deadline))
        if decision.deadline_exceeded:
            break
        absent = _absent(call)
        _count(decision, tallies, {key for key, names in reads.items() if not names & absent})
        tried += 1
    files = {rs.name: rs.file for rs in book.rule_sets}
    found = [_finding(files[key[0]], key, tally) for key, tally in tallies.items()]
    return Verdict([f for f in found if f is not None], tried)


def _absent(call: Call) -> frozenset[str]:
    """The context names the call has no data for: a rule reading them may fail on every node for want of it (a
    metrics-server not answering yet), which says nothing of the rule."""
    absent = set() if any(node.key.usage is not None for node in call.nodes) else {"metrics"}
    return frozenset(absent | ({"namespaceObject"} if call.namespace is None else set()))


def _count(decision: Decision, tallies: dict[tuple[str, str], _Tally], judged: set[tuple[str, str]]) -> None:
    """Each rule's results over the nodes of one pod's decision, added to its tally (the rules `judged` only)."""
    outcomes: dict[tuple[str, str], list[str]] = {}
    errors: dict[tuple[str, str], str] = {}
    for verdict in decision.nodes.values():
        for result in verdict.filters:
            if result.outcome == "skipped":
                continue
            kind = "pass" if result.outcome == "fail" and not result.enforce else result.outcome  # Audit rejects none
            outcomes.setdefault((result.rule_set, result.rule), []).append(kind)
            if result.error:
                errors.setdefault((result.rule_set, result.rule), result.error)
        for score in verdict.scores:
            outcomes.setdefault((score.rule_set, score.rule), []).append("error" if score.error else "pass")
            if score.error:
                errors.setdefault((score.rule_set, score.rule), score.error)
    for key, kinds in outcomes.items():
        if key not in judged:
            continue
        tally = tallies.setdefault(key, _Tally())
        tally.applied += 1
        tally.errored += all(k == "error" for k in kinds)
        tally.rejected += all(k == "fail" for k in kinds)
        tally.first_error = tally.first_error or errors.get(key, "")


def _finding(file: str, key: tuple[str, str], tally: _Tally) -> Finding | None:
    pods = f"{tally.applied} pod{'s' if tally.applied != 1 else ''} tried that it applies to"
    if tally.errored == tally.applied:
        return Finding(file, *key, f"it could not be evaluated on any node for any of the {pods}: {tally.first_error}")
    if tally.rejected == tally.applied:
        return Finding(file, *key, f"it rejected every node for each of the {pods}")
    return None
