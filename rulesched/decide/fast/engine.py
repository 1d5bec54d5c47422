"""The fast path's evaluation: a prepared rule book (`prepared(book)`) and a `Call` in; a Decision out. No I/O.

What the rules mean is `rulesched.decide.semantics` (docs/rules/language.md), shared with the plain
evaluation of `rulesched.decide.reference`, which the fast path is tested against and never falls back on:
the same Decision, computed with the plan's caches (`plan.py`). A call over node-only rules is lookups;
per-pod rules run once per pod key and node, each rule over all the nodes that miss in one engine call.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import math
import operator
from collections.abc import Hashable, Iterable, Sequence
from operator import attrgetter
from typing import Any, cast

from rulesched.decide import semantics
from rulesched.decide.decision import Decision, NodeDecision, RuleError, ScoreResult
from rulesched.decide.fast.budget import WORK_NODE, WORK_POD, work
from rulesched.decide.fast.caches import APPLYING_KEPT
from rulesched.decide.fast.collect import collect, error_kinds
from rulesched.decide.fast.filters import filter_outcomes, firsts, for_node, verdict_of
from rulesched.decide.fast.groups import (
    FEW_GROUPS,
    Candidates,
    Grouped,
    Results,
    full_bindings,
    groups_of,
    projections,
)
from rulesched.decide.fast.keys import PodRequest
from rulesched.decide.fast.memos import NODE_MEMO_KEPT, node_bindings
from rulesched.decide.fast.node_only import with_memos
from rulesched.decide.fast.outcomes import (
    Applying,
    FilterOutcome,
    Kind,
    ScoreOutcome,
)
from rulesched.decide.fast.plan import Plan
from rulesched.decide.fast.rule import Rule
from rulesched.decide.fast.scores import normalized_within, raw_range, score_outcome
from rulesched.decide.fast.tables import remember
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.cel import Program
from rulesched.rules.cel import deadline as cel_deadline
from rulesched.rules.compiled import CompiledFilter, CompiledScore
from rulesched.rules.context import NodeContext


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
        prepared.caches.reset()
    return decision


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
            self.score(score_rules, with_memos(plan, passing), [decision.nodes[n.name] for n in passing])
        return decision

    def applying(self) -> tuple[tuple[int, ...], list[str]]:
        """The rule sets whose match conditions hold (their indices, and their names, a copy of the Decision's
        own), memoized by pod key; their errors recorded."""
        plan, request = self.plan, self.request
        key = request.key_for(plan.conditions_read_now)
        found = plan.caches.applying.get(key)
        if found is None:
            work(plan.conditions_work)
            engine = plan.engine
            shared = {name: engine.convert(value) for name, value in request.values.items()}
            probe = Decision(generation=0, applied=[])
            indices = [i for i, rs in enumerate(plan.rule_sets) if semantics.applies(rs, engine, shared, probe)]
            names = [plan.rule_sets[i].name for i in indices]
            found = remember(plan.caches.applying, key, Applying(tuple(indices), names, probe.errors), APPLYING_KEPT)
        if found.errors:
            self.decision.errors.extend(found.errors)
        return found.indices, list(found.names)

    def filter(self, applying: Sequence[int], nodes: Sequence[NodeContext], *, private: bool) -> list[NodeDecision]:
        """Each node's verdict, reused from the node's memo when the same rules ran for the same pod key.

        Cached verdicts are shared between Decisions and never changed; `private` asks for copies that the
        scoring step may fill in. When every candidate has its verdict, this is one lookup per node."""
        plan, request = self.plan, self.request
        rules = [r for i in applying for r in plan.filters[i]]
        key = plan.caches.key(tuple(applying), *(request.rule_key(r) for r in rules if r.per_pod))
        # The key holds the plan's token: a verdict kept before a `Caches.reset` finds nothing under it.
        table = plan.caches.filter_table(key)
        found: list[NodeDecision] = list(map(table.get, nodes))  # type: ignore[arg-type]  # None: checked below
        if not all(found):  # verdicts are true: only a missing one is false
            missing = list(itertools.compress(nodes, map(operator.not_, found)))
            work(WORK_NODE * len(missing))
            candidates = with_memos(plan, missing)
            # Memos made now take over their previous context's verdicts when those hold (`Caches.keep`).
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
        collect(table, found, nodes, self.decision)
        return list(map(NodeDecision.named, found, map(_NAME, nodes))) if private else found

    def verdicts(self, rules: Sequence[Rule], candidates: Candidates) -> tuple[list[NodeDecision], list[Kind]]:
        """The verdicts of `candidates` (none kept yet) under the filter `rules`, and each distinct one made, with
        its errors and failed filters, after the index of a node that has it."""
        nodes, memos = candidates
        if not rules:
            alone = verdict_of(self.plan, rules, ())
            return [alone.verdict] * len(nodes), [Kind(0, alone)]
        # Nodes with the same outcomes get the same verdict (no name in it: nodes share it), made once. The
        # node-only filters' outcomes of a node are named by its signature, kept by the plan.
        slots = tuple(rule.slot for rule in rules if not rule.per_pod)
        columns = {rule.position: self.per_pod_filter(rule, candidates) for rule in rules if rule.per_pod}
        signatures = self.plan.caches.signatures_of(slots, nodes, memos)
        keys: Sequence[Hashable] = signatures
        if columns:
            keys = list(zip(signatures, *[list(map(id, column)) for column in columns.values()], strict=True))

        def outcomes(i: int) -> list[FilterOutcome]:
            results = memos[i].node_only or ()  # a filter's slots hold filter outcomes
            return [columns[r.position][i] if r.per_pod else cast(FilterOutcome, results[r.slot]) for r in rules]

        made = {key: Kind(i, verdict_of(self.plan, rules, outcomes(i))) for key, i in firsts(keys)}
        verdicts = {key: kind.made.verdict for key, kind in made.items()}
        return list(map(verdicts.__getitem__, keys)), list(made.values())

    def per_pod_filter(self, rule: Rule, candidates: Candidates) -> list[FilterOutcome]:
        plan, request = self.plan, self.request
        compiled = rule.compiled
        assert isinstance(compiled, CompiledFilter)
        grouped = self.results(rule, compiled.program, "expression", candidates)
        message: Program | None = compiled.message_program if grouped.full else None
        if compiled.message_program is not None and not grouped.full and any(r is False for r in grouped.values):
            message = plan.caches.bound(compiled.message_program, rule, "message", request)
            if message is None:  # cannot be bound: the message runs against each node's full bindings
                shared = self.pod_values()
                results = Results(grouped.per_node().values, [full_bindings(plan, shared, m) for m in candidates.memos])
                names = list(map(_NAME, candidates.nodes))
                return filter_outcomes(plan, rule, names, results, compiled.message_program)
        # One outcome per group, each node given its group's (an error names its node).
        representatives = [candidates.nodes[i].name for i in grouped.representatives]
        outcomes = filter_outcomes(plan, rule, representatives, Results(grouped.values, grouped.bindings), message)
        by_node = list(map(outcomes.__getitem__, grouped.groups))
        if any(outcome.error is not None for outcome in outcomes):
            named = zip(by_node, map(_NAME, candidates.nodes), strict=True)
            by_node = [o if o.error is None else for_node(o, name) for o, name in named]
        return by_node

    def results(self, rule: Rule, program: Program, kind: str, candidates: Candidates) -> Grouped:
        """A per-pod program's results over `candidates`, by group of alike nodes.

        Nodes whose values read by the rule are equal (the same zone label, say) form one group, and one
        evaluation answers the whole group. With few groups, the pod's values are added to each group's
        bindings; with many, the program is bound to the pod once (compiled again: worth it only then) and
        runs over each node's kept bindings."""
        plan, memos = self.plan, candidates.memos
        groups, representatives = groups_of(plan, rule, candidates)
        work(WORK_POD + rule.work * len(representatives))
        bound = plan.caches.bound(program, rule, kind, self.request) if len(representatives) > FEW_GROUPS else None
        if bound is not None:
            bindings = [node_bindings(plan.engine, memos[i], keep=True) for i in representatives]
            results = bound.evaluate_many(bindings)
        else:
            shared = self.pod_values()
            bindings = [full_bindings(plan, shared, memos[i]) for i in representatives]
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
        table = plan.caches.score_table(plan.caches.key("prioritize", tuple(r.position for r in rules), pods, ranges))
        found: list[NodeDecision] = list(map(table.get, nodes))  # type: ignore[arg-type]  # None: checked below
        if not all(found):
            missing = list(itertools.compress(nodes, map(operator.not_, found)))
            work(2 * WORK_NODE * len(missing))
            verdicts = list(map(NodeDecision, map(_NAME, missing)))
            errors: list[RuleError] = []
            self.score(rules, with_memos(plan, missing), verdicts, ranges, errors)
            table.put_all(missing, verdicts, error_kinds(rules, missing, verdicts, errors))
            found = list(map(table.__getitem__, nodes))
        collect(table, found, nodes, self.decision)
        return found

    def range_of(self, rule: Rule, nodes: Sequence[NodeContext]) -> tuple[float, float] | None:
        """A MinMax score rule's range over `nodes` (None: no node has a value); for a node-only rule, from the
        raw values kept for the nodes, without a look at their memos."""
        plan = self.plan
        if rule.per_pod:
            return raw_range(self.score_outcomes(rule, with_memos(plan, nodes)))
        low, high = plan.caches.ranges[rule.slot]
        try:  # a node without its values kept fails the comparisons (None), once made they are kept
            least, most = min(map(low.get, nodes)), max(map(high.get, nodes))  # type: ignore[type-var]
        except TypeError:
            least = None
        except ValueError:  # no node
            return None
        if least is None:
            with_memos(plan, nodes)
            least, most = min(map(low.__getitem__, nodes)), max(map(high.__getitem__, nodes))
        if least == math.inf or most is None or most == -math.inf:  # no value, or an infinite one: counted exactly
            return raw_range(self.score_outcomes(rule, with_memos(plan, nodes)))
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
                normalized = normalized_within(raws, compiled.normalize, ranges[index])
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
        _drain(map(setattr, verdicts, itertools.repeat("score"), semantics.round_scores(totals, weights)))

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
                found[i] = remember(memos[i].per_pod, key, score_outcome(result), NODE_MEMO_KEPT)
        return found  # type: ignore[return-value]


def warm(prepared: Plan, nodes: Sequence[NodeContext]) -> None:
    """Give the nodes their memos for a rule book (`prepared(book)`), with their node-only results, and their
    projections for its per-pod rules (pod-independent: what groups alike nodes), as the next request would:
    what a refresh ahead of requests does (after a metrics poll or a rules reload)."""
    with_memos(prepared, nodes)
    for rule in prepared.per_pod:
        projections(prepared, rule, nodes)


_RAW = attrgetter("raw")

_ERROR = attrgetter("error")

_SCORES = attrgetter("scores")

_NAME = attrgetter("name")

_NODE_ONLY = attrgetter("node_only")


def _drain(calls: Iterable[object]) -> None:
    """Run the calls of a C-level map for their effect."""
    collections.deque(calls, maxlen=0)
