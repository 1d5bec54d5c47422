"""The gather step of a verb: the node contexts a call is evaluated on, from the request's parsed args and the
shared state (`Extender`: the node contexts, the node source, the full-mode nodes kept for preempt).

In names mode a candidate comes from the node source by name, and a name the source lacks is fetched once
with a direct GET (at most `--max-node-fetches` a call); in full mode from the nodes the request carries. A
preempt call's candidates are the nodes as its victims' eviction would leave them. Building many contexts
runs in the evaluation thread (`Extender.in_evaluator`), so that the event loop keeps answering meanwhile.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.concurrency import run_in_threadpool

from rulesched.cluster.pods.index import PodSource
from rulesched.extender import wire
from rulesched.extender.state import Extender
from rulesched.rules.context import NodeContext, with_pods

SEEN_NODES = 10_000
"""Full-mode nodes without a resourceVersion kept for preempt (`Extender.seen`)."""


def forget(pods: PodSource | None, pod: Mapping[str, Any]) -> None:
    """The pod is being scheduled (again): a placement this extender made for it earlier is void, before its
    candidates' contexts are read (their `recent` counts it no more)."""
    if pods is not None:
        pods.forget(pod)


async def candidates(
    extender: Extender, args: wire.ExtenderArgs, replaced: list[object] | None = None
) -> tuple[list[NodeContext], dict[str, str]]:
    """The nodes to evaluate, and the names that cannot be evaluated with why. Full mode's nodes are
    remembered for preempt; the ones they replace go to `replaced`, to be freed after the answer."""
    nodes, names, contexts = args.nodes, args.node_names or [], extender.contexts
    if nodes is not None:
        _remember(extender.seen, nodes, replaced if replaced is not None else [])
        return await extender.in_evaluator(len(nodes), lambda: contexts.for_objects(nodes)), {}
    known, unknown = await extender.in_evaluator(len(names), lambda: contexts.for_names(names))
    if not unknown:
        return known, {}
    return await _fetch_missing(extender, args.node_names or [], known, unknown)


async def _fetch_missing(
    extender: Extender, order: Sequence[str], known: list[NodeContext], unknown: list[str]
) -> tuple[list[NodeContext], dict[str, str]]:
    source = extender.cluster.nodes
    if source is None:
        reason = "rulesched has no node source: register it with nodeCacheCapable: false, or give it --nodes"
        return known, dict.fromkeys(unknown, reason)
    timeout = extender.settings.node_fetch_timeout
    asked = unknown[: extender.settings.max_node_fetches]
    fetched = await asyncio.gather(*(_fetch(extender, name, timeout) for name in asked))
    found = {name: node for name, node in zip(asked, fetched, strict=True) if node is not None}
    missing = {
        name: "node not found by rulesched (not in its node cache nor in the API)"
        for name in asked
        if name not in found
    }
    if len(unknown) > len(asked):
        reason = f"node not in rulesched's node cache (not looked up: more than {len(asked)} unknown names)"
        missing.update(dict.fromkeys(unknown[len(asked) :], reason))
    by_name = {c.name: c for c in known} | {n: extender.contexts.context(node) for n, node in found.items()}
    return [by_name[n] for n in order if n in by_name], missing


async def _fetch(extender: Extender, name: str, timeout: float) -> Mapping[str, Any] | None:
    source = extender.cluster.nodes
    assert source is not None
    try:
        return await asyncio.wait_for(run_in_threadpool(source.fetch, name), timeout + 1)
    except TimeoutError:
        return None


def _remember(
    seen: OrderedDict[str, Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]], replaced: list[object]
) -> None:
    """Keep the nodes preempt may need that the contexts do not: those without a resourceVersion
    (the contexts keep every other node's latest version), the oldest first out past `SEEN_NODES`."""
    for node in nodes:
        if node["metadata"].get("resourceVersion"):
            continue
        name = node["metadata"]["name"]
        old = seen.pop(name, None)
        if old is not None:
            replaced.append(old)
        seen[name] = node
    while len(seen) > SEEN_NODES:
        replaced.append(seen.popitem(last=False)[1])


def preempt_contexts(extender: Extender, victims: Mapping[str, wire.Victims]) -> list[NodeContext]:
    """Each candidate node's context as it would be with its victims gone (from `pods`, `allocated`
    and `recent`), so that rules see the node preemption would leave."""
    nodes, seen, contexts = extender.cluster.nodes, extender.seen, extender.contexts
    found = []
    for name, chosen in victims.items():
        node = (nodes.get(name) if nodes else None) or seen.get(name)
        if node is None:
            node = contexts.last_seen(name)  # full mode: the latest version filter was sent
        if node is not None:
            context = contexts.context(node)
            if chosen.uids:
                context = with_pods(context, context.pods.without(set(chosen.uids)))
            found.append(context)
    return found
