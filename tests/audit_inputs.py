"""The audit tests' inputs: a payments rule set, two nodes and three running pods, written as files.

`batch-1` (1.5 CPU, tier batch) runs on the payments node `a` beside `web` (1 CPU): the payments rule set
rejects it there twice (pool, and the fit once `web` is counted); `batch-2` runs alone on `b` and
violates only the `mode: Audit` filter. The same files feed `rulesched audit` and `rulesched serve`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.builders import make_container, make_node, rule_set, write_rules

PAYMENTS = rule_set(
    "payments",
    """
    matchConditions:
    - name: batch
      expression: "has(pod.metadata.labels) && 'tier' in pod.metadata.labels && pod.metadata.labels['tier'] == 'batch'"
    filters:
    - name: no-batch-on-payments
      expression: >-
        !has(node.metadata.labels) || !('pool' in node.metadata.labels)
        || node.metadata.labels['pool'] != 'payments'
      message: batch pods do not run on payments nodes
    - name: fits
      expression: "allocated.cpu + requests.cpu <= allocatable.cpu"
      message: does not fit
    - name: soft
      mode: Audit
      expression: "false"
      message: soft says no
    """,
)


def running_pod(name: str, namespace: str, node: str, cpu: str, tier: str, **metadata: Any) -> dict[str, Any]:
    """A running pod on `node`, as the API lists it."""
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": {"tier": tier}} | metadata
    spec = {"nodeName": node, "containers": [make_container("app", {"cpu": cpu})]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def nodes() -> list[dict[str, Any]]:
    return [make_node("a", {"pool": "payments"}), make_node("b", {"pool": "general"})]


def pods() -> list[dict[str, Any]]:
    return [
        running_pod("batch-1", "jobs", "a", "1500m", "batch"),
        running_pod("batch-2", "jobs", "b", "1500m", "batch"),
        running_pod("web", "web", "a", "1", "web"),
    ]


def write_inputs(directory: Path, rules: str = PAYMENTS) -> dict[str, Path]:
    """The rules directory, a NodeList and a PodList under `directory`."""
    write_rules(directory / "rules", rules)
    paths = {"rules": directory / "rules", "nodes": directory / "nodes.json", "pods": directory / "pods.json"}
    paths["nodes"].write_text(json.dumps({"kind": "NodeList", "items": nodes()}))
    paths["pods"].write_text(json.dumps({"kind": "PodList", "items": pods()}))
    return paths
