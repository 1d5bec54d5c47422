"""The extender verbs: filter, prioritize, preempt, bind, explain — each a thin layer over the engine.

Every handler reads the active RuleBook once, so a request is answered by one generation of the
rules. Bad input is a 400 with a JSON reason; nothing here lets an exception reach a worker.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from rulesched.cluster import Cluster
from rulesched.cluster.contexts import NodeContexts
from rulesched.extender import wire
from rulesched.extender.observe import Observer
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.decision import Decision
from rulesched.rules.engine import evaluate
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings
from rulesched.tools.explain import explain_report

_SEEN_NODES = 10_000


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


def error_response(status_code: int, message: str) -> Response:
    return json_response({"error": message}, status_code)


class BodyTooLargeError(Exception):
    pass


class Extender:
    """The state the verbs share: settings, the rule store, the cluster sources, the observer."""

    def __init__(self, settings: Settings, store: RuleStore, cluster: Cluster, observer: Observer) -> None:
        self.settings = settings
        self.store = store
        self.cluster = cluster
        self.observer = observer
        self.contexts = NodeContexts(cluster.nodes, cluster.metrics)
        # Full mode sends whole nodes with filter, but only names with preempt: remember recent ones.
        self.seen: OrderedDict[str, Mapping[str, Any]] = OrderedDict()

    async def body(self, request: Request) -> bytes:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise BodyTooLargeError
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLargeError
            chunks.append(chunk)
        return b"".join(chunks)

    def book(self) -> RuleBook:
        book = self.store.book
        if book is None:  # the server does not start without rules; kept for type safety
            raise RuntimeError("no rules loaded")
        return book

    async def candidates(self, args: wire.ExtenderArgs) -> tuple[list[NodeContext], dict[str, str]]:
        """The nodes to evaluate, and the names that cannot be evaluated with why."""
        if args.nodes is not None:
            self._remember(args.nodes)
            return self.contexts.for_objects(args.nodes), {}
        known, unknown = self.contexts.for_names(args.node_names or [])
        if not unknown:
            return known, {}
        return await self._fetch_missing(args.node_names or [], known, unknown)

    async def _fetch_missing(
        self, order: Sequence[str], known: list[NodeContext], unknown: list[str]
    ) -> tuple[list[NodeContext], dict[str, str]]:
        source = self.cluster.nodes
        if source is None:
            reason = "rulesched has no node source: register it with nodeCacheCapable: false, or give it --nodes"
            return known, dict.fromkeys(unknown, reason)
        timeout = self.settings.node_fetch_timeout
        fetched = await asyncio.gather(*(self._fetch(name, timeout) for name in unknown))
        found = {name: node for name, node in zip(unknown, fetched, strict=True) if node is not None}
        missing = {
            name: "node not found by rulesched (not in its node cache nor in the API)"
            for name in unknown
            if name not in found
        }
        by_name = {c.name: c for c in known} | {n: self.contexts.context(node) for n, node in found.items()}
        return [by_name[n] for n in order if n in by_name], missing

    async def _fetch(self, name: str, timeout: float) -> Mapping[str, Any] | None:
        source = self.cluster.nodes
        assert source is not None
        try:
            return await asyncio.wait_for(run_in_threadpool(source.fetch, name), timeout + 1)
        except TimeoutError:
            return None

    def _remember(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        for node in nodes:
            name = node["metadata"]["name"]
            self.seen[name] = node
            self.seen.move_to_end(name)
        while len(self.seen) > _SEEN_NODES:
            self.seen.popitem(last=False)

    def preempt_contexts(self, names: Sequence[str]) -> list[NodeContext]:
        contexts = []
        for name in names:
            node = (self.cluster.nodes.get(name) if self.cluster.nodes else None) or self.seen.get(name)
            if node is not None:
                contexts.append(self.contexts.context(node))
        return contexts


async def filter_verb(extender: Extender, request: Request) -> Response:
    args = wire.ExtenderArgs.parse(await extender.body(request))
    started = time.perf_counter()
    book = extender.book()
    contexts, unknown = await extender.candidates(args)
    decision = evaluate(book, args.pod, contexts, run_scores=False)
    failed = {n.name: n.reason or "" for n in decision.nodes.values() if not n.passed and n.resolvable}
    unresolvable = {n.name: n.reason or "" for n in decision.nodes.values() if not n.passed and not n.resolvable}
    unresolvable.update(unknown)
    passed = set(decision.passed)
    if args.nodes is not None:
        answer = wire.filter_result(
            [n for n in args.nodes if n["metadata"]["name"] in passed], None, failed, unresolvable
        )
    else:
        answer = wire.filter_result(None, [n for n in args.names if n in passed], failed, unresolvable)
    extender.observer.decision("filter", args.pod, decision, len(args.names), time.perf_counter() - started)
    return json_response(answer)


async def prioritize_verb(extender: Extender, request: Request) -> Response:
    args = wire.ExtenderArgs.parse(await extender.body(request))
    started = time.perf_counter()
    book = extender.book()
    contexts, _ = await extender.candidates(args)
    decision = evaluate(book, args.pod, contexts, run_filters=False)
    scores = {name: _score(decision, name) for name in args.names}
    extender.observer.decision("prioritize", args.pod, decision, len(args.names), time.perf_counter() - started)
    return json_response(wire.host_priority_list(scores))


def _score(decision: Decision, name: str) -> int:
    node = decision.nodes.get(name)
    return node.score or 0 if node is not None else 0


async def preempt_verb(extender: Extender, request: Request) -> Response:
    args = wire.ExtenderPreemptionArgs.parse(await extender.body(request))
    book = extender.book()
    contexts = extender.preempt_contexts(list(args.victims))
    decision = evaluate(book, args.pod, contexts, run_scores=False)
    kept = {name: v for name, v in args.victims.items() if name in decision.nodes and decision.nodes[name].passed}
    return json_response(wire.preemption_result(kept))


async def bind_verb(extender: Extender, request: Request) -> Response:
    args = wire.ExtenderBindingArgs.parse(await extender.body(request))
    binder = extender.cluster.binder
    if binder is None:
        return json_response(wire.binding_result("rulesched does not bind pods: start it with --enable-bind"))
    error = await run_in_threadpool(binder.bind, args.pod_namespace, args.pod_name, args.pod_uid, args.node)
    return json_response(wire.binding_result(error))


async def explain_verb(extender: Extender, request: Request) -> Response:
    if not extender.settings.enable_explain:
        return error_response(404, "explain is disabled: start rulesched serve with --enable-explain")
    args = wire.ExtenderArgs.parse(await extender.body(request))
    contexts, unknown = await extender.candidates(args)
    decision = evaluate(extender.book(), args.pod, contexts)
    report = explain_report(args.pod, decision)
    report["unknownNodes"] = unknown
    return json_response(report)
