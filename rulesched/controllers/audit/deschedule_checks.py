"""The descheduler's two checks before an eviction, each against the state of now: does the pod still violate the
rule on its node, and can it land elsewhere.

`still_violates`: the pod, read again from the pod cache, evaluated on its node's current context with the rule
book in force (a reload since the audit's last step, a fixed rule, a node's load gone down: no eviction).

`elsewhere`: the other nodes kube-scheduler would place the pod on (`fit.py`: node name, selector and required
affinity, cordon, Ready, taints, resources) that also pass every applying rulesched filter for it now. A pod
evicted with no such node would come back where it was, or stay Pending.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rulesched.cluster.fit import NodeUse, insufficient, node_misfit, pod_level_requests
from rulesched.cluster.sources import node_names
from rulesched.controllers.audit.audit import Violation, audit_pod, passing_nodes, pod_of
from rulesched.rules.book import RuleBook
from rulesched.rules.context import NodeContext
from rulesched.rules.pod_values import namespace_name

if TYPE_CHECKING:
    from rulesched.controllers.audit.auditor import Auditor


def rules_view(auditor: Auditor, violation: Violation) -> Mapping[str, Any] | None:
    """The pod cache's view of the violating pod (the one rules read), if it is still on its node."""
    for view in auditor.sources.pods.node_pods(violation.node, None).pods:
        if (view.get("metadata") or {}).get("uid") == violation.uid:
            return view
    return None


def _namespace(auditor: Auditor, view: Mapping[str, Any]) -> Mapping[str, Any] | None:
    namespaces = auditor.sources.namespaces
    return namespaces.get(namespace_name(view)) if namespaces is not None else None


def still_violates(auditor: Auditor, book: RuleBook, violation: Violation, now: datetime.datetime) -> str | None:
    """None when the pod still violates the rule on its node now, else why it does not (the pod's state)."""
    current = auditor.store.book
    if current is None or current.generation != book.generation:
        return "rules-changed"  # the audit evaluates the new book from its next step
    view = rules_view(auditor, violation)
    node = auditor.sources.nodes.get(violation.node)
    if view is None or node is None:
        return "gone"
    context = auditor.contexts.context(node, violation.node)
    found = audit_pod(book, view, context, auditor.audited(), namespace=_namespace(auditor, view), now=now)
    if any((v.rule_set, v.rule, v.enforce) == (violation.rule_set, violation.rule, True) for v in found):
        return None
    return "no-longer-violates"


def _use(context: NodeContext) -> NodeUse:
    allocated = context.pods.allocated
    return NodeUse(int(allocated.get("pods", 0.0)), allocated)


def fitting_contexts(
    auditor: Auditor, placement: Mapping[str, Any], requests: Mapping[str, float], node: str
) -> list[NodeContext]:
    """The contexts of the nodes but `node` that kube-scheduler's node checks pass the pod on, cheapest first."""
    source = auditor.sources.nodes
    wanted = pod_level_requests(placement, requests)
    found = []
    for name in node_names(source):
        obj = source.get(name) if name != node else None
        if obj is None or node_misfit(placement, obj) is not None:
            continue
        context = auditor.contexts.context(obj, name)
        if not insufficient(wanted, obj, _use(context)):
            found.append(context)
    return found


def elsewhere(
    auditor: Auditor,
    book: RuleBook,
    view: Mapping[str, Any],
    placement: Mapping[str, Any],
    node: str,
    now: datetime.datetime,
) -> list[str]:
    """The other nodes both kube-scheduler's node checks and the pod's rulesched filters pass now."""
    contexts = fitting_contexts(auditor, placement, view.get("requests") or {}, node)
    if not contexts:
        return []
    return passing_nodes(book, pod_of(view), contexts, namespace=_namespace(auditor, view), now=now)
