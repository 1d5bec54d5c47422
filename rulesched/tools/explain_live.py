"""`rulesched explain NAMESPACE/NAME`: a pod of a running cluster, explained on the cluster's live state.

The pod, the nodes, the pods on them, the pod's namespace and the node metrics are read from the API
(`cluster/snapshot.py`); the rules decide on them here, as the server would, or the server decides
(`--server`: the nodes by name, so it uses its own node cache, or `--send-nodes` as kube-scheduler's full
mode sends them). A bound pod is decided as it was before binding: without `spec.nodeName` and not among
the pods of its node. The report is explain's, plus `live`: where the pod is, what kube-scheduler said,
and what the rules say about that now.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rulesched.cluster.kube.access import KubeEnvironment, connect, find_config
from rulesched.cluster.snapshot import Snapshot, SnapshotError, read_snapshot
from rulesched.rules.cel import EngineName, make_engine
from rulesched.rules.loader import load_rule_book
from rulesched.tools.explain import explain_remote, explained, extender_args
from rulesched.tools.inputs import Sources


def parse_target(target: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` (or `NAME`, in `default`) as (namespace, name); ValueError when it is neither."""
    namespace, _, name = target.rpartition("/")
    if not name or "/" in namespace:
        raise ValueError(f"{target!r}: want NAMESPACE/NAME (or NAME, in the default namespace)")
    return namespace or "default", name


def snapshot_of(target: str, kubeconfig: Path | None) -> Snapshot:
    """The pod `target` and the cluster around it, with `--kubeconfig` or the usual credentials."""
    namespace, name = parse_target(target)
    env = KubeEnvironment()
    choice = find_config(kubeconfig, env)
    if choice is None:
        raise SnapshotError(
            "no Kubernetes credentials found (no in-cluster service account, no $KUBECONFIG, no ~/.kube/config): "
            "pass --kubeconfig"
        )
    access = connect(choice, env)
    try:
        return read_snapshot(access, namespace, name)
    finally:
        access.close()


def as_scheduled(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as kube-scheduler sent it to the extender: not yet bound (no `spec.nodeName`)."""
    sent = copy.deepcopy(dict(pod))
    (sent.get("spec") or {}).pop("nodeName", None)
    return sent


def explain_live(rules: Sequence[Path], engine: EngineName, snapshot: Snapshot) -> dict[str, Any]:
    """The decision of the rules in `rules` for the pod, on the live state, with what it says about the pod."""
    book = load_rule_book(list(rules), make_engine(engine))
    pod = as_scheduled(snapshot.pod)
    sources = Sources(snapshot.metrics, snapshot.pods, snapshot.namespaces())
    report = explained(book, pod, snapshot.nodes, sources)
    return report | {"live": live_view(snapshot, report)}


def explain_live_remote(url: str, snapshot: Snapshot, *, send_nodes: bool, book: str) -> dict[str, Any]:
    """The server's decision for the pod: its node cache by name, or (`send_nodes`) the nodes read here."""
    pod = as_scheduled(snapshot.pod)
    names = [str((n.get("metadata") or {}).get("name")) for n in snapshot.nodes]
    body = extender_args(pod, None, snapshot.nodes) if send_nodes else extender_args(pod, names, None)
    report = explain_remote(url, body, book=book)
    return report | {"live": live_view(snapshot, report)}


def live_view(snapshot: Snapshot, report: Mapping[str, Any]) -> dict[str, Any]:
    """Where the pod is and what the rules say about it: the `live` part of the report."""
    pod = snapshot.pod
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName") or None
    conditions = status.get("conditions") or []
    scheduled: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    return {
        "phase": status.get("phase"),
        "node": node,
        "schedulerName": spec.get("schedulerName") or "default-scheduler",
        "scheduler": scheduled.get("message") or None,
        "summary": _bound(node, report) if node else _pending(report, scheduled.get("message")),
        "notes": list(snapshot.notes),
    }


def _bound(node: str, report: Mapping[str, Any]) -> str:
    ranking = [n["name"] for n in report.get("ranking") or []]
    if node in ranking:
        score = (report["ranking"][ranking.index(node)] or {}).get("score")
        return (
            f"bound to {node}: the rules pass it and rank it {ranking.index(node) + 1} of {len(ranking)} "
            f"(score {score}) on the state now"
        )
    verdict = next((n for n in report.get("nodes") or [] if n.get("name") == node), None)
    if verdict is None:
        return f"bound to {node}, which the rules did not see (not among the nodes, or unknown to the server)"
    return (
        f"bound to {node}, which the rules reject now: {verdict.get('reason')} (the state changed since it was "
        "scheduled, or it was scheduled without these rules)"
    )


def _pending(report: Mapping[str, Any], said: str | None) -> str:
    nodes, ranking = report.get("nodes") or [], report.get("ranking") or []
    if not ranking:
        return f"pending: the rules reject every node ({len(nodes)}); each node below says why"
    text = (
        f"pending, though the rules let {len(ranking)} of {len(nodes)} nodes pass (best: {ranking[0]['name']}): "
        "kube-scheduler's own filters (resources, affinity, taints) or the queue keep it waiting"
    )
    return text + (f"; kube-scheduler said: {said}" if said else "")


def live_lines(live: Mapping[str, Any]) -> list[str]:
    """The `live` part as the lines the table starts with."""
    where = live["node"] or "not bound"
    lines = [f"Live: phase {live['phase']}, {where}, scheduler {live['schedulerName']}", f"  {live['summary']}"]
    if live["scheduler"] and live["node"]:
        lines.append(f"  kube-scheduler said: {live['scheduler']}")
    lines += [f"  note: {note}" for note in live["notes"]]
    return lines
