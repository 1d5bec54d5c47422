"""The world of `bench/real_evictions.py` (issue #39's table), with no process in it: the nodes, the two rule
books, the four Deployments, and the verdict on what the control plane did with them.

One payments node with room for everything; `GENERAL_NODES` general nodes with 3 CPUs each. Rules v1 let batch
pods run only on payments nodes, so every pod starts there; v2 says "no batch pods on payments nodes" and asks for
evictions. Of the four Deployments only `plain` can land elsewhere as kube-scheduler sees it: `pinned` names the
payments node in its node selector, `big` requests 3.5 CPUs, and `opted-out` says `rulesched.io/deschedule:
"false"` after 20 annotations of 1 KB each (beyond what a bounded view of the pod keeps).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]
NAMESPACE = "batch"
PAYMENTS = "payments-0"
GENERAL_NODES = 2
GENERAL_CPUS = "3"
CLASS_LABEL = "workload.xy.com/class"
OPT_OUT = "rulesched.io/deschedule"
RULES_FILE = "batch-placement.yaml"
EVICTIONS_PER_MINUTE = 10
"""The v2 rule set's `maxEvictionsPerMinute` (and the replicas' `--deschedule-rate`): high enough that the two
expected evictions come within seconds, so that a wrong third one would too."""

_MATCH = f"has(pod.metadata.labels) && '{CLASS_LABEL}' in pod.metadata.labels && pod.metadata.labels['{CLASS_LABEL}'] == 'batch'"  # noqa: E501
_HEAD = f"""apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: batch-placement
spec:
  matchConditions:
  - name: batch
    expression: "{_MATCH}"
  filters:
"""
RULES_V1 = (
    _HEAD
    + """  - name: payments-only
    expression: "'pool' in node.metadata.labels && node.metadata.labels['pool'] == 'payments'"
    message: batch pods run only on payments nodes
"""
)
"""Batch pods run only on payments nodes."""
RULES_V2 = (
    _HEAD
    + f"""  - name: no-batch-on-payments
    expression: "!('pool' in node.metadata.labels) || node.metadata.labels['pool'] != 'payments'"
    message: batch pods do not run on payments nodes
  descheduling:
    action: Evict
    minAgeSeconds: 0
    maxEvictionsPerMinute: {EVICTIONS_PER_MINUTE}
"""
)
"""No batch pods on payments nodes, and evict those that are."""


@dataclass(frozen=True)
class Workload:
    """One row of the table: a Deployment, what kube-scheduler allows it, and whether it should move."""

    name: str
    replicas: int
    allows: str
    moves: bool


WORKLOADS = (
    Workload("plain", 2, "general nodes have room", moves=True),
    Workload("pinned", 1, f"nowhere else (`nodeSelector: kubernetes.io/hostname: {PAYMENTS}`)", moves=False),
    Workload("big", 1, f"nowhere else (requests 3.5 CPU, general nodes have {GENERAL_CPUS})", moves=False),
    Workload("opted-out", 1, f'opted out (`{OPT_OUT}: "false"` after 20 annotations of 1 KB)', moves=False),
)
EXPECTED_EVICTIONS = sum(w.replicas for w in WORKLOADS if w.moves)


def nodes() -> list[tuple[str, dict[str, str], str]]:
    """(name, labels, CPUs) of each node: the payments node first."""
    general = [(f"general-{index}", "general", GENERAL_CPUS) for index in range(GENERAL_NODES)]
    return [
        (name, {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "pool": pool}, cpus)
        for name, pool, cpus in [(PAYMENTS, "payments", "16"), *general]
    ]


def node(name: str, labels: Mapping[str, str]) -> JSON:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}


def node_status(name: str, cpus: str) -> JSON:
    """Ready, as no kubelet will report it, with `cpus` allocatable."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resources = {"cpu": cpus, "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "no kubelet: set by the script",
             "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
    return {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready],
                       "addresses": [{"type": "Hostname", "address": name}]}}  # fmt: skip


def deployment(workload: Workload) -> JSON:
    """The Deployment of a row: batch pods of the pause image (never pulled: there is no kubelet)."""
    labels = {"app": workload.name, CLASS_LABEL: "batch"}
    cpu = "3500m" if workload.name == "big" else "100m"
    container = {"name": "c", "image": "registry.k8s.io/pause:3.9",
                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}  # fmt: skip
    spec: JSON = {"terminationGracePeriodSeconds": 0, "containers": [container]}
    metadata: JSON = {"labels": labels}
    if workload.name == "pinned":
        spec["nodeSelector"] = {"kubernetes.io/hostname": PAYMENTS}
    if workload.name == "opted-out":
        notes = {f"notes.xy.com/n{index:02d}": "x" * 1024 for index in range(1, 21)}
        metadata["annotations"] = {**notes, OPT_OUT: "false"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": workload.name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"replicas": workload.replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": metadata, "spec": spec}},
    }  # fmt: skip


@dataclass(frozen=True)
class Placed:
    """A pod as the API lists it: its workload, name, uid, node, and whether it is being deleted."""

    workload: str
    name: str
    uid: str
    node: str
    terminating: bool


def placed(pods: Sequence[JSON]) -> list[Placed]:
    """The listed pods of the workloads, by their `app` label."""
    return [
        Placed(p["metadata"].get("labels", {}).get("app", ""), p["metadata"]["name"], p["metadata"]["uid"],
               p["spec"].get("nodeName", ""), bool(p["metadata"].get("deletionTimestamp")))
        for p in pods
    ]  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """What happened after the reload: the pods before and after, the pods evicted (by uid, from the Events
    rulesched wrote), each replica's count of evictions, and how long no eviction came before the end."""

    before: Sequence[Placed]
    after: Sequence[Placed]
    evicted: Sequence[str]
    by_replica: Mapping[str, int]
    quiet_s: float


def checks(outcome: Outcome, quiet: float) -> list[tuple[str, bool]]:
    """Each expectation of the issue's table, and whether it held."""
    moving = {p.uid for p in outcome.before if moves(p.workload)}
    staying = {p.uid for p in outcome.before if not moves(p.workload)}
    live = [p for p in outcome.after if not p.terminating]
    replacements = [p for p in live if moves(p.workload) and p.uid not in moving]
    counts = sorted(outcome.by_replica.values())
    return [
        (f"every pod placed on {PAYMENTS} under rules v1", {p.node for p in outcome.before} == {PAYMENTS}),
        (f"exactly {EXPECTED_EVICTIONS} evictions", len(outcome.evicted) == EXPECTED_EVICTIONS),
        ("the evicted pods are the plain replicas", set(outcome.evicted) == moving),
        ("evicted by one replica", counts[-1:] == [len(outcome.evicted)] and sum(counts) == len(outcome.evicted)),
        ("the replacements placed on general nodes",
         len(replacements) == EXPECTED_EVICTIONS and all(p.node.startswith("general-") for p in replacements)),
        ("every other workload keeps its pods (same uids)", staying <= {p.uid for p in live}),
        (f"no further eviction for {quiet:g} s", outcome.quiet_s >= quiet),
    ]  # fmt: skip


def moves(name: str) -> bool:
    """Whether the workload `name` should move (its pods evicted and placed elsewhere)."""
    return any(w.moves for w in WORKLOADS if w.name == name)


def table(outcome: Outcome) -> str:
    """The issue's table as it came out: per Deployment, its pods evicted and where its pods are now."""
    lines = ["| Deployment | what kube-scheduler allows | evicted | pods now (node) | same pods | expected |",
             "|---|---|---:|---|---|---|"]  # fmt: skip
    for workload in WORKLOADS:
        before = {p.uid for p in outcome.before if p.workload == workload.name}
        now = [p for p in outcome.after if p.workload == workload.name and not p.terminating]
        evicted = len(before & set(outcome.evicted))
        where = ", ".join(sorted(f"{p.name} ({p.node or 'pending'})" for p in now))
        same = "yes" if {p.uid for p in now} == before else "no"
        expected = "moves to general nodes" if workload.moves else "stays"
        lines.append(f"| `{workload.name}` ({workload.replicas}) | {workload.allows} | {evicted} | {where} | {same} "
                     f"| {expected} |")  # fmt: skip
    return "\n".join(lines)
