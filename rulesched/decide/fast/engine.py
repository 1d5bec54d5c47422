"""The evaluation engine: a RuleBook, a pod and candidate nodes in; a Decision out. No I/O.

Semantics (DESIGN.md §1) are those of `rulesched.decide.semantics`, shared with the plain evaluation of
`rulesched.decide.reference`, which this engine is tested against and never falls back on: the same
Decision, computed with the caches of `rulesched.decide.fast.plan` (DESIGN.md §4). A request for node-only
rules is lookups; per-pod rules run once per pod key and node, over cached per-node engine values, each
rule over all the nodes that miss in one engine call.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import functools
import itertools
import math
import operator
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any, NamedTuple, cast

from rulesched.decide import semantics
from rulesched.decide.decision import Decision, Failures, FilterResult, NodeDecision, Outcome, RuleError, ScoreResult
from rulesched.decide.fast.outcomes import (
    NONE_FAILED,
    Applying,
    Errors,
    FailedVerdict,
    FilterOutcome,
    Kind,
    Made,
    NodeOutcome,
    PositionedError,
    ScoreOutcome,
)
from rulesched.decide.fast.plan import (
    APPLYING_KEPT,
    NODE_MEMO_KEPT,
    WORK_NODE,
    WORK_POD,
    WORK_PROJECTION,
    NodeMemo,
    Plan,
    PodRequest,
    Rule,
    Verdicts,
    node_bindings,
    projection,
    remember,
    work,
)
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.cel import Program
from rulesched.rules.cel import deadline as cel_deadline
from rulesched.rules.compiled import CompiledFilter, CompiledScore
from rulesched.rules.context import NodeContext

MAX_SCORE = semantics.MAX_SCORE


def evaluate(prepared: Plan, call: Call) -> Decision:
    """Evaluate a rule book (`prepared(book)`) for the call's pod over its nodes: what its verb runs (scores over
    the nodes that pass).

    Past the call's deadline, every rule not yet evaluated fails with the deadline's error and follows its
    failurePolicy; the Decision says so, and the plan's caches are dropped, so that no result of this call
    is reused."""
    request = prepared.request(call.pod, call.now or datetime.datetime.now(datetime.UTC), call.namespace, call.estimate)
    with cel_deadline(call.deadline) as expiry:
        evaluation = Evaluation(prepared, request)
        decision = evaluation.run(call.nodes, call.verb, call.distinct, call.names)
    if expiry.expired:
        decision.deadline_exceeded = True
        prepared.reset()
    return decision


class Candidates(NamedTuple):
    """Candidate nodes and their memos, side by side."""

    nodes: Sequence[NodeContext]
    memos: Sequence[NodeMemo]

    def subset(self, indices: Sequence[int]) -> Candidates:
        return Candidates([self.nodes[i] for i in indices], [self.memos[i] for i in indices])


class Results(NamedTuple):
    """A program's results over some nodes, and the engine bindings each came from."""

    values: Sequence[Any]
    bindings: Sequence[Any]


class Grouped(NamedTuple):
    """A per-pod program's results by group of nodes that look the same to it: one evaluation a group."""

    groups: list[int]
    """Each node's group."""
    representatives: list[int]
    """Each group's node whose bindings it was evaluated with."""
    values: list[Any]
    bindings: list[Any]
    """Each group's result, and the bindings it came from."""
    full: bool
    """The bindings are full ones (node and pod), not the node's alone for a program bound to the pod."""

    def per_node(self) -> Results:
        return Results(
            list(map(self.values.__getitem__, self.groups)), list(map(self.bindings.__getitem__, self.groups))
        )


class Evaluation:
    """One pod's evaluation against the book's plan: the Decision it fills, and the steps that fill it."""

    def __init__(self, plan: Plan, request: PodRequest) -> None:
        self.plan = plan
        self.request = request
        self.decision = Decision(generation=plan.generation, applied=[])

    def run(
        self, nodes: Sequence[NodeContext], verb: Verb, distinct: bool = False, names: Sequence[str] | None = None
    ) -> Decision:
        """The Decision over `nodes` of what `verb` runs; `distinct` and `names` as in `Call`."""
        plan, decision = self.plan, self.decision
        filters, scores = verb.filters, verb.scores
        applying, decision.applied = self.applying()
        score_rules = [r for i in applying for r in plan.scores[i]] if scores else []
        # The request's names are its own, kept as they are (nothing changes them).
        names = list(map(_NAME, nodes)) if names is None else names if type(names) is list else list(names)
        if filters:
            # Verdicts kept for filters are shared by the nodes that fare alike: named only when scored.
            verdicts = self.filter(applying, nodes, private=scores)
            decision.set_verdicts(names, verdicts, shared=not scores)
        elif scores:
            verdicts = self.prioritize(score_rules, nodes)
            decision.set_verdicts(names, verdicts, filtered=False)
        else:
            verdicts = [NodeDecision(n.name) for n in nodes]
            decision.set_verdicts(names, verdicts, filtered=False)
        if not distinct and len(set(decision.names)) != len(nodes):
            # A repeated name (kube-scheduler never sends one; the extender answers 400 before it gets here,
            # and says so with `distinct`) is evaluated once, as its first occurrence.
            work()
            first: dict[str, NodeContext] = {}
            for node in nodes:
                first.setdefault(node.name, node)
            return Evaluation(plan, self.request).run(list(first.values()), verb)
        if filters and scores:
            work()
            passing = [nodes[i] for i, v in enumerate(verdicts) if v.passed]
            self.score(score_rules, _memos(plan, passing), [decision.nodes[n.name] for n in passing])
        return decision

    def applying(self) -> tuple[tuple[int, ...], list[str]]:
        """The rule sets whose match conditions hold (their indices, and their names, a copy of the Decision's
        own), memoized by pod key; their errors recorded."""
        plan, request = self.plan, self.request
        key = request.key_for(plan.conditions_read_now)
        found = plan.applying.get(key)
        if found is None:
            work(plan.conditions_work)
            engine = plan.engine
            shared = {name: engine.convert(value) for name, value in request.values.items()}
            probe = Decision(generation=0, applied=[])
            indices = [i for i, rs in enumerate(plan.rule_sets) if semantics.applies(rs, engine, shared, probe)]
            names = [plan.rule_sets[i].name for i in indices]
            found = remember(plan.applying, key, Applying(tuple(indices), names, probe.errors), APPLYING_KEPT)
        if found.errors:
            self.decision.errors.extend(found.errors)
        return found.indices, list(found.names)

    def filter(self, applying: Sequence[int], nodes: Sequence[NodeContext], *, private: bool) -> list[NodeDecision]:
        """Each node's verdict, reused from the node's memo when the same rules ran for the same pod key.

        Cached verdicts are shared between Decisions and never changed; `private` asks for copies that the
        scoring step may fill in. When every candidate has its verdict, this is one lookup per node."""
        plan, request = self.plan, self.request
        rules = [r for i in applying for r in plan.filters[i]]
        key = plan.key(tuple(applying), *(request.rule_key(r) for r in rules if r.per_pod))
        # The key holds the plan's token: a verdict kept before a `Plan.reset` finds nothing under it.
        table = plan.filter_table(key)
        found: list[NodeDecision] = list(map(table.get, nodes))  # type: ignore[arg-type]  # None: checked below
        if not all(found):  # verdicts are true: only a missing one is false
            missing = list(itertools.compress(nodes, map(operator.not_, found)))
            work(WORK_NODE * len(missing))
            candidates = _memos(plan, missing)
            # Memos made now take over their previous context's verdicts when those hold (`Plan.keep`).
            taken = list(map(table.get, missing))
            if any(taken):
                candidates = candidates.subset([i for i, hit in enumerate(taken) if hit is None])
            if candidates.nodes:
                verdicts, kinds = self.verdicts(rules, candidates)
                table.put_all(candidates.nodes, verdicts, kinds)
                if len(verdicts) == len(nodes):  # every candidate new (a pod never seen): in their order
                    found = verdicts
            if not all(found):
                found = list(map(table.__getitem__, nodes))
        _collect(table, found, nodes, self.decision)
        return list(map(NodeDecision.named, found, map(_NAME, nodes))) if private else found

    def verdicts(self, rules: Sequence[Rule], candidates: Candidates) -> tuple[list[NodeDecision], list[Kind]]:
        """The verdicts of `candidates` (none kept yet) under the filter `rules`, and each distinct one made, with
        its errors and failed filters, after the index of a node that has it."""
        nodes, memos = candidates
        if not rules:
            alone = _verdict(self.plan, rules, ())
            return [alone.verdict] * len(nodes), [Kind(0, alone)]
        # Nodes with the same outcomes get the same verdict (no name in it: nodes share it), made once. The
        # node-only filters' outcomes of a node are named by its signature, kept by the plan.
        slots = tuple(rule.slot for rule in rules if not rule.per_pod)
        columns = {rule.position: self.per_pod_filter(rule, candidates) for rule in rules if rule.per_pod}
        signatures = self.plan.signatures_of(slots, nodes, memos)
        keys: Sequence[Hashable] = signatures
        if columns:
            keys = list(zip(signatures, *[list(map(id, column)) for column in columns.values()], strict=True))

        def outcomes(i: int) -> list[FilterOutcome]:
            results = memos[i].node_only or ()  # a filter's slots hold filter outcomes
            return [columns[r.position][i] if r.per_pod else cast(FilterOutcome, results[r.slot]) for r in rules]

        made = {key: Kind(i, _verdict(self.plan, rules, outcomes(i))) for key, i in _firsts(keys)}
        verdicts = {key: kind.made.verdict for key, kind in made.items()}
        return list(map(verdicts.__getitem__, keys)), list(made.values())

    def per_pod_filter(self, rule: Rule, candidates: Candidates) -> list[FilterOutcome]:
        plan, request = self.plan, self.request
        compiled = rule.compiled
        assert isinstance(compiled, CompiledFilter)
        grouped = self.results(rule, compiled.program, "expression", candidates)
        message: Program | None = compiled.message_program if grouped.full else None
        if compiled.message_program is not None and not grouped.full and any(r is False for r in grouped.values):
            message = plan.bound(compiled.message_program, rule, "message", request)
            if message is None:  # cannot be bound: the message runs against each node's full bindings
                shared = self.pod_values()
                results = Results(
                    grouped.per_node().values, [_full_bindings(plan, shared, m) for m in candidates.memos]
                )
                names = list(map(_NAME, candidates.nodes))
                return _filter_outcomes(plan, rule, names, results, compiled.message_program)
        # One outcome per group, each node given its group's (an error names its node).
        representatives = [candidates.nodes[i].name for i in grouped.representatives]
        outcomes = _filter_outcomes(plan, rule, representatives, Results(grouped.values, grouped.bindings), message)
        by_node = list(map(outcomes.__getitem__, grouped.groups))
        if any(outcome.error is not None for outcome in outcomes):
            named = zip(by_node, map(_NAME, candidates.nodes), strict=True)
            by_node = [o if o.error is None else _for_node(o, name) for o, name in named]
        return by_node

    def results(self, rule: Rule, program: Program, kind: str, candidates: Candidates) -> Grouped:
        """A per-pod program's results over `candidates`, by group of alike nodes.

        Nodes whose values read by the rule are equal (the same zone label, say) form one group, and one
        evaluation answers the whole group. With few groups, the pod's values are added to each group's
        bindings; with many, the program is bound to the pod once (compiled again: worth it only then) and
        runs over each node's kept bindings."""
        plan, memos = self.plan, candidates.memos
        groups, representatives = _groups(plan, rule, candidates)
        work(WORK_POD + rule.work * len(representatives))
        bound = plan.bound(program, rule, kind, self.request) if len(representatives) > _FEW_GROUPS else None
        if bound is not None:
            bindings = [node_bindings(plan, memos[i], keep=True) for i in representatives]
            results = bound.evaluate_many(bindings)
        else:
            shared = self.pod_values()
            bindings = [_full_bindings(plan, shared, memos[i]) for i in representatives]
            results = program.evaluate_many(bindings)
        return Grouped(groups, representatives, list(results), bindings, bound is None)

    def pod_values(self) -> dict[str, Any]:
        """The request's values (those the book reads: `Plan.request_values`) converted for the engine."""
        engine = self.plan.engine
        return {name: engine.convert(value) for name, value in self.request.values.items()}

    def prioritize(self, rules: Sequence[Rule], nodes: Sequence[NodeContext]) -> list[NodeDecision]:
        """Scores alone (kube-scheduler's prioritize), every node a candidate. A node's verdict depends only
        on its raw values and on each MinMax rule's range over the candidates: while those hold, the verdict
        kept for the node under that key is reused."""
        plan, request = self.plan, self.request
        ranges = tuple(self.range_of(rule, nodes) if rule.min_max else None for rule in rules)
        pods = tuple(request.rule_key(r) for r in rules if r.per_pod)
        table = plan.score_table(plan.key("prioritize", tuple(r.position for r in rules), pods, ranges))
        found: list[NodeDecision] = list(map(table.get, nodes))  # type: ignore[arg-type]  # None: checked below
        if not all(found):
            missing = list(itertools.compress(nodes, map(operator.not_, found)))
            work(2 * WORK_NODE * len(missing))
            verdicts = list(map(NodeDecision, map(_NAME, missing)))
            errors: list[RuleError] = []
            self.score(rules, _memos(plan, missing), verdicts, ranges, errors)
            table.put_all(missing, verdicts, _error_kinds(rules, missing, verdicts, errors))
            found = list(map(table.__getitem__, nodes))
        _collect(table, found, nodes, self.decision)
        return found

    def range_of(self, rule: Rule, nodes: Sequence[NodeContext]) -> tuple[float, float] | None:
        """A MinMax score rule's range over `nodes` (None: no node has a value); for a node-only rule, from the
        raw values kept for the nodes, without a look at their memos."""
        plan = self.plan
        if rule.per_pod:
            return _range(self.score_outcomes(rule, _memos(plan, nodes)))
        low, high = plan.ranges[rule.slot]
        try:  # a node without its values kept fails the comparisons (None), once made they are kept
            least, most = min(map(low.get, nodes)), max(map(high.get, nodes))  # type: ignore[type-var]
        except TypeError:
            least = None
        except ValueError:  # no node
            return None
        if least is None:
            _memos(plan, nodes)
            least, most = min(map(low.__getitem__, nodes)), max(map(high.__getitem__, nodes))
        if least == math.inf or most is None or most == -math.inf:  # no value, or an infinite one: counted exactly
            return _range(self.score_outcomes(rule, _memos(plan, nodes)))
        return least, most

    def score(
        self,
        rules: Sequence[Rule],
        candidates: Candidates,
        verdicts: Sequence[NodeDecision],
        ranges: Sequence[tuple[float, float] | None] | None = None,
        errors: list[RuleError] | None = None,
    ) -> None:
        """Score `candidates` (they passed) into their `verdicts`, their errors added to `errors` (the Decision's
        when None); `ranges`, when given, are each MinMax rule's range over all the candidates, of which these
        may be only some. C-level passes where it can: after a metrics poll this runs for every candidate."""
        nodes = candidates.nodes
        count = len(nodes)
        sink = self.decision.errors if errors is None else errors
        totals: list[float] | None = None
        weights = 0.0
        for index, rule in enumerate(rules):
            compiled = rule.compiled
            assert isinstance(compiled, CompiledScore)
            outcomes = self.score_outcomes(rule, candidates)
            raws = list(map(_RAW, outcomes))
            failures = list(map(_ERROR, outcomes))
            if any(failures):
                sink.extend(
                    RuleError(rule.rule_set, compiled.name, n.name, error)
                    for n, error in zip(nodes, failures, strict=True)
                    if error is not None
                )
            if ranges is None:
                normalized = semantics.normalize(raws, compiled.normalize)
            else:
                normalized = _normalized(raws, compiled.normalize, ranges[index])
            constant = (rule.rule_set, compiled.name, compiled.enforce, compiled.weight)
            results = map(ScoreResult, *(itertools.repeat(c, count) for c in constant), raws, normalized, failures)
            _drain(map(list.append, map(_SCORES, verdicts), results))
            if compiled.enforce:
                weight = compiled.weight
                weights += weight
                if totals is None:  # 0.0 + x is x: as if summed from zero
                    totals = [weight * n for n in normalized]
                else:
                    totals = [t + weight * n for t, n in zip(totals, normalized, strict=True)]
        if not weights or totals is None:
            _drain(map(setattr, verdicts, itertools.repeat("score"), itertools.repeat(0)))
            return
        # semantics.round_score, in C-level passes: min(MAX_SCORE, max(0, floor(round(total / weights, 9) + 0.5))).
        means = map(round, map(operator.truediv, totals, itertools.repeat(weights)), itertools.repeat(9))
        rounded = map(math.floor, map(operator.add, means, itertools.repeat(0.5)))
        scores = map(min, itertools.repeat(MAX_SCORE), map(max, itertools.repeat(0), rounded))
        _drain(map(setattr, verdicts, itertools.repeat("score"), scores))

    def score_outcomes(self, rule: Rule, candidates: Candidates) -> list[ScoreOutcome]:
        memos = candidates.memos
        if not rule.per_pod:
            return list(map(operator.itemgetter(rule.slot), map(_NODE_ONLY, memos)))
        key = (rule.position, self.request.rule_key(rule))
        found: list[ScoreOutcome | None] = [m.per_pod.get(key) for m in memos]
        missing = [i for i, hit in enumerate(found) if hit is None]
        if missing:
            work(WORK_NODE * len(missing))
            grouped = self.results(rule, rule.compiled.program, "expression", candidates.subset(missing))
            for i, result in zip(missing, grouped.per_node().values, strict=True):
                found[i] = remember(memos[i].per_pod, key, _score_outcome(result), NODE_MEMO_KEPT)
        return found  # type: ignore[return-value]


def warm(prepared: Plan, nodes: Sequence[NodeContext]) -> None:
    """Give the nodes their memos for a rule book (`prepared(book)`), with their node-only results, as the next
    request would: what a refresh ahead of requests does (after a metrics poll or a rules reload)."""
    _memos(prepared, nodes)


def _memos(plan: Plan, nodes: Sequence[NodeContext]) -> Candidates:
    """Each node's memo for the plan; those made now get their node-only results first."""
    memos, fresh = plan.memos(nodes)
    if fresh:
        _node_only(plan, Candidates(nodes, memos).subset(fresh))
        for i in fresh:
            plan.keep(nodes[i], memos[i])
    return Candidates(nodes, memos)


_CHUNK = 32
"""Nodes whose node-only results are computed together: few enough that their temporary bindings
(about 8 KB each with cel-cpp) stay small, so that a first request over 5000 nodes does not leave the
process thousands of freed activations larger."""


def _node_only(plan: Plan, candidates: Candidates) -> None:
    """Every node-only result of the book for new memos, one engine call per rule and chunk of nodes; for
    memos made again after a new metrics sample, only the results of the rules that read `metrics`."""
    nodes, memos = candidates
    new = [i for i, memo in enumerate(memos) if memo.carried is None]
    again = [i for i, memo in enumerate(memos) if memo.carried is not None]
    for group, rules in ((new, plan.node_only), (again, [plan.node_only[slot] for slot in plan.sample_slots])):
        for start in range(0, len(group), _CHUNK):
            chunk = group[start : start + _CHUNK]
            bindings = [node_bindings(plan, memos[i], keep=False) for i in chunk]
            names = [nodes[i].name for i in chunk]
            columns = [_node_only_column(plan, rule, names, bindings) for rule in rules]
            for row, i in enumerate(chunk):
                _complete(memos[i], rules, [column[row] for column in columns])


def _complete(memo: NodeMemo, rules: Sequence[Rule], results: list[NodeOutcome]) -> None:
    """Put the node-only `results` of `rules` in `memo`: all of them, or those a new sample made again."""
    carried = memo.carried
    if carried is None:
        memo.node_only = results
        return
    for rule, result in zip(rules, results, strict=True):
        carried[rule.slot] = result
    memo.node_only, memo.carried = cast(list[NodeOutcome], carried), None  # every None replaced


def _node_only_column(plan: Plan, rule: Rule, names: Sequence[str], bindings: Sequence[Any]) -> Sequence[Any]:
    results = Results(rule.compiled.program.evaluate_many(bindings), bindings)
    if isinstance(rule.compiled, CompiledFilter):
        return _filter_outcomes(plan, rule, names, results, rule.compiled.message_program)
    return [_score_outcome(r) for r in results.values]


def _filter_outcomes(
    plan: Plan, rule: Rule, names: Sequence[str], results: Results, message_program: Program | None
) -> list[FilterOutcome]:
    compiled = rule.compiled
    assert isinstance(compiled, CompiledFilter)
    outcomes = []
    passed: FilterOutcome | None = None
    failed: dict[int, FilterOutcome] = {}
    """Failed outcomes by binding (nodes grouped by `results` share one) or, for a static message, all under 0."""
    shared: dict[str, FilterOutcome] = {}
    """Outcomes without an error name no node: one object per message serves every node, and every call
    (interned in the plan), which saves memory and lets `verdicts` share verdicts between nodes."""
    per_binding = (message_program or compiled.message_program) is not None
    for name, result, binding in zip(names, results.values, results.bindings, strict=True):
        if result is True:
            if passed is None:
                passed = plan.interned(_plain_outcome(rule, compiled, None))
            outcomes.append(passed)
        elif result is False:
            key = id(binding) if per_binding else 0
            outcome = failed.get(key)
            if outcome is None:
                message = semantics.filter_message(compiled, binding, message_program)
                outcome = shared.get(message)
                if outcome is None:
                    outcome = shared[message] = plan.interned(_plain_outcome(rule, compiled, message))
                failed[key] = outcome
            outcomes.append(outcome)
        else:
            error = semantics.not_bool(result)
            assert error is not None
            errored = FilterResult(rule.rule_set, compiled.name, "error", compiled.enforce, error=error)
            reason = f"rule {rule.rule_set}/{compiled.name} could not be evaluated"
            found = RuleError(rule.rule_set, compiled.name, name, error)
            outcomes.append(
                FilterOutcome(errored, reason if not compiled.ignore_errors and compiled.enforce else None, found)
            )
    return outcomes


def _plain_outcome(rule: Rule, compiled: CompiledFilter, message: str | None) -> FilterOutcome:
    """The outcome of a filter that evaluated to a bool: failed (with `message`) or passed (None)."""
    status: Outcome = "fail" if message is not None else "pass"
    result = FilterResult(rule.rule_set, compiled.name, status, compiled.enforce, message)
    reason = f"{message} (rule {rule.rule_set}/{compiled.name})" if message is not None and compiled.enforce else None
    return FilterOutcome(result, reason, None)


def _score_outcome(result: Any) -> ScoreOutcome:
    error = semantics.not_number(result)
    return ScoreOutcome(None if error else float(result), error)


_RAW = attrgetter("raw")
_ERROR = attrgetter("error")
_SCORES = attrgetter("scores")
_NAME = attrgetter("name")
_BINDINGS = attrgetter("bindings")
_NODE_ONLY = attrgetter("node_only")


_FEW_FAILED = 64
"""Up to this many failed verdicts in a table, all are handed to the Decision to count its candidates' with
C-level scans (`list.count`); beyond (a message per node, say), those its candidates have, counted at once."""


def _collect(table: Verdicts, found: Sequence[NodeDecision], nodes: Sequence[NodeContext], decision: Decision) -> None:
    """Hand the Decision what it needs to find, once asked, the errors of the verdicts `found` for `nodes` in
    `table` and the filters they failed (a verdict is shared by the nodes that fare alike: each is counted
    once): the extender asks after its answer is sent. What the table holds is taken now, as it is (it changes
    with later calls, maybe in the evaluation thread): its few entries, or those of these nodes."""
    errors_of = table.errors
    if errors_of:
        if len(errors_of) <= len(nodes):
            errors_of = dict(errors_of)
        else:
            errors_of = {node: errors_of[node] for node in filter(errors_of.__contains__, nodes)}
    failed = table.failed
    if not failed and not errors_of:
        decision.counted_failures = Counter()
        return
    if len(failed) <= _FEW_FAILED:
        kinds = list(failed.values())
    else:
        kinds = [failed[key] for key in set(map(id, found)) if key in failed]
    decision.collect_later(functools.partial(_collected, found, nodes, errors_of, kinds), found)


def _collected(
    found: Sequence[NodeDecision],
    nodes: Sequence[NodeContext],
    errors_of: Mapping[NodeContext, Errors],
    kinds: list[FailedVerdict],
    rejecting: list[NodeDecision] | None,
) -> tuple[list[RuleError], Failures]:
    """The errors of `nodes` (from `errors_of`), added rule by rule, node by node (the reference's order), and
    how many of the verdicts `found` failed each filter (`kinds`: the failed verdicts, each with the filters
    it failed); C-level passes, as this runs for every candidate of every call. When every failed verdict
    rejected its node, they are counted among those of `found` that did (`rejecting`, when known): usually
    a few of the candidates."""
    errors: list[RuleError] = []
    if errors_of:
        with_errors = filter(errors_of.__contains__, nodes)  # in candidate order
        by_node = [
            (position, index, error) for index, node in enumerate(with_errors) for position, error in errors_of[node]
        ]
        errors = [error for _, _, error in sorted(by_node, key=lambda e: (e[0], e[1]))]
    counted: Failures = Counter()
    if kinds:
        if rejecting is not None and not any(verdict.passed for verdict, _ in kinds):
            found = rejecting
        ids = list(map(id, found))
        counts: Mapping[int, int] = Counter(ids) if len(kinds) > _FEW_FAILED else {}
        for verdict, failures in kinds:
            count = counts.get(id(verdict), 0) if counts else ids.count(id(verdict))
            if count:
                for rule in failures:
                    counted[rule] += count
    return errors, counted


def _drain(calls: Iterable[object]) -> None:
    """Run the calls of a C-level map for their effect."""
    collections.deque(calls, maxlen=0)


def _error_kinds(
    rules: Sequence[Rule], nodes: Sequence[NodeContext], verdicts: Sequence[NodeDecision], errors: Sequence[RuleError]
) -> list[Kind]:
    """The verdicts scored with `errors`, each with its node's errors by rule position (as `Verdicts` keeps them)."""
    if not errors:
        return []
    position = {(rule.rule_set, rule.compiled.name): rule.position for rule in rules}
    index = {node.name: i for i, node in enumerate(nodes)}
    by_node: dict[int, list[PositionedError]] = {}
    for error in errors:
        by_node.setdefault(index[error.node or ""], []).append(
            PositionedError(position[error.rule_set, error.rule], error)
        )
    return [Kind(i, Made(verdicts[i], tuple(found), NONE_FAILED)) for i, found in by_node.items()]


def _firsts(keys: Sequence[Hashable]) -> Iterable[tuple[Hashable, int]]:
    """Each distinct key of `keys` and an index where it is (the last)."""
    return dict(zip(keys, range(len(keys)), strict=True)).items()


def _verdict(plan: Plan, rules: Sequence[Rule], outcomes: Sequence[FilterOutcome]) -> Made:
    """A verdict from filters' outcomes, with its errors and its failed rules (interned): shared by every node
    with those outcomes, so it names none (`Decision` knows the names)."""
    verdict = NodeDecision("")
    errors = []
    for rule, outcome in zip(rules, outcomes, strict=True):
        verdict.filters.append(outcome.result)
        if outcome.reason is not None:
            assert isinstance(rule.compiled, CompiledFilter)
            semantics.reject(verdict, outcome.reason, rule.compiled.resolvable)
        if outcome.error is not None:
            errors.append(PositionedError(rule.position, outcome.error))
    failed = frozenset((f.rule_set, f.rule, f.enforce) for f in verdict.filters if f.outcome == "fail")
    return Made(verdict, tuple(errors), plan.interned(failed))


_FEW_GROUPS = 16
"""Up to this many groups of alike nodes, a per-pod rule runs on full bindings instead of being bound to
the pod: binding compiles the expression again (about 0.4 ms), evaluating a group costs microseconds."""


def _groups(plan: Plan, rule: Rule, candidates: Candidates) -> tuple[list[int], list[int]]:
    """Each node's group of nodes that look the same to `rule` (by their projections, kept by the plan), and
    each group's representative: beyond `_FEW_GROUPS` (the program then runs on the representatives' own
    bindings), a node that keeps its bindings when there is one, so that no new ones are made."""
    nodes, memos = candidates
    table = plan.projections.setdefault(rule.position, {})
    keys: list[bytes | None] = list(map(table.get, nodes))
    if None in keys:
        work(WORK_PROJECTION * keys.count(None))
        for i, key in enumerate(keys):
            if key is None:  # interned: equal projections are one object, compared by identity below
                keys[i] = table[nodes[i]] = plan.interned(projection(rule, nodes[i]))
    indices = range(len(keys))
    representative = dict(zip(keys, indices, strict=True))
    if len(representative) > _FEW_GROUPS:
        kept = list(map(operator.is_not, map(_BINDINGS, memos), itertools.repeat(None)))
        representative.update(zip(itertools.compress(keys, kept), itertools.compress(indices, kept), strict=True))
    group_of = {key: group for group, key in enumerate(representative)}
    return list(map(group_of.__getitem__, keys)), list(representative.values())


def _full_bindings(plan: Plan, shared: Mapping[str, Any], memo: NodeMemo) -> Any:
    return plan.engine.bindings({**memo.values, **shared})


def _for_node(outcome: FilterOutcome, name: str) -> FilterOutcome:
    """A group's error outcome, naming one of its nodes."""
    assert outcome.error is not None
    return outcome._replace(error=dataclasses.replace(outcome.error, node=name))


def _range(outcomes: Sequence[ScoreOutcome]) -> tuple[float, float] | None:
    """The least and the greatest raw value of `outcomes` (None: no value); C-level unless one has none."""
    known: list[Any] = list(map(_RAW, outcomes))
    try:  # a None among floats fails the comparisons: checking for one first would cost as much again
        low, high = min(known), max(known)
    except (TypeError, ValueError):  # a None among the values, or no value
        low = high = None
    if low is None or high is None:
        values: list[float] = list(itertools.compress(known, map(operator.is_not, known, itertools.repeat(None))))
        return (min(values), max(values)) if values else None
    return low, high


def _normalized(raws: Sequence[float | None], how: str, known: tuple[float, float] | None) -> list[float]:
    """`semantics.normalize` with the candidates' range given, so that a subset of them can be scored."""
    if how == "Clamp" or known is None:
        return semantics.normalize(raws, how)
    low, high = known
    return semantics.normalize([*raws, low, high], how)[: len(raws)]
