"""Make the example recording: scheduler-like traffic against the shipped rules and the example cluster.

Run from the repository root: `python examples/recording/record.py`. It serves `rules/` on the
`examples/cluster/` snapshot with `--record`, sends each pod below as kube-scheduler would (a filter
call over every node, then a prioritize call over the nodes that passed, names mode), and writes the
segment uncompressed, so that it can be read and reviewed: `examples/recording/segment-000001.jsonl`.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from rulesched.extender.server import build  # noqa: E402
from rulesched.settings import Settings  # noqa: E402

NODES = ["k8s-master", "k8s-node1", "k8s-node2", "gpu-node1"]


def pod(namespace: str, name: str, labels: dict[str, str], requests: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "uid": f"0e0e0e0e-0000-4000-8000-{name:0>12}"[:36],
                     "labels": labels},
        "spec": {"schedulerName": "rulesched",
                 "containers": [{"name": "main", "image": "example", "resources": {"requests": requests}}]},
    }  # fmt: skip


PODS = [
    json.loads((ROOT / "examples" / "pod.json").read_text()),
    pod("web-team", "web-2", {"app": "web", "rulesched.io/zone": "zone-b"}, {"cpu": "100m", "memory": "64Mi"}),
    pod("default", "etl-3", {"app": "etl", "workload.xy.com/class": "batch"}, {"cpu": "500m", "memory": "256Mi"}),
    pod("ml-team", "train-1", {"app": "train"}, {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}),
    pod("default", "report-1", {"app": "report", "workload.xy.com/class": "batch"}, {"cpu": "200m"}),
]


def main() -> None:
    target = ROOT / "examples" / "recording"
    with tempfile.TemporaryDirectory() as directory:
        settings = Settings(
            rules_dir=ROOT / "rules",
            nodes_file=ROOT / "examples/cluster/nodes.yaml",
            metrics_file=ROOT / "examples/cluster/metrics.yaml",
            pods_file=ROOT / "examples/cluster/pods.yaml",
            namespaces_file=ROOT / "examples/cluster/namespaces.yaml",
            cluster="off",
            record_dir=Path(directory),
        )
        with TestClient(build(settings).app) as client:
            for body in PODS:
                answer = client.post("/filter", json={"Pod": body, "Nodes": None, "NodeNames": NODES}).json()
                passed = answer["NodeNames"]
                client.post("/prioritize", json={"Pod": body, "Nodes": None, "NodeNames": passed})
        segment = Path(directory) / "segment-000001.jsonl.gz"
        (target / "segment-000001.jsonl").write_bytes(gzip.decompress(segment.read_bytes()))


if __name__ == "__main__":
    main()
