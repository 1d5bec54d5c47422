"""Rule directories whose decisions differ in known ways, for the shadow, recording and replay tests.

`LIVE` is the founding example alone. `SHADOW` changes it three ways, each with a known effect on the
example cluster's classic nodes (k8s-master without the label; k8s-node1 at 87m CPU, k8s-node2 at 67m):
- a filter rejects k8s-node1 ("drained"): every filter call over the classic nodes differs on k8s-node1;
- a filter rejects every node for pods labelled `batch`: such pods become unschedulable;
- the score prefers the busiest node: every prioritize call over k8s-node1 and k8s-node2 changes its
  top node from k8s-node2 to k8s-node1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LIVE = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: xy-least-cpu
spec:
  variables:
  - name: cpuUsed
    expression: metrics.cpu.usage
  filters:
  - name: require-xy-label
    expression: "has(node.metadata.labels) && 'filter.xy.com' in node.metadata.labels"
    message: missing label filter.xy.com
  scores:
  - name: least-cpu
    expression: -variables.cpuUsed
"""

SHADOW = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: xy-least-cpu
spec:
  variables:
  - name: cpuUsed
    expression: metrics.cpu.usage
  filters:
  - name: require-xy-label
    expression: "has(node.metadata.labels) && 'filter.xy.com' in node.metadata.labels"
    message: missing label filter.xy.com
  - name: drain-node1
    expression: node.metadata.name != 'k8s-node1'
    message: k8s-node1 is being drained
  - name: no-batch
    expression: "!has(pod.metadata.labels) || !('batch' in pod.metadata.labels)"
    message: batch pods go elsewhere
  scores:
  - name: most-cpu
    expression: variables.cpuUsed
"""

CLASSIC = ["k8s-master", "k8s-node1", "k8s-node2"]
SURVIVORS = ["k8s-node1", "k8s-node2"]


def rules_dir(directory: Path, text: str) -> Path:
    """`directory` made, holding one rule file with `text`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rules.yaml").write_text(text)
    return directory


def pod(name: str, *, batch: bool = False) -> dict[str, Any]:
    labels = {"app": name} | ({"batch": "yes"} if batch else {})
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }


def names_args(pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {"Pod": pod, "Nodes": None, "NodeNames": names}
