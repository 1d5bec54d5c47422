"""Where the tests find the repository's files and the shared real-traffic fixtures."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "rules"
EXAMPLES = REPO / "examples"
EXAMPLE_NODES = EXAMPLES / "cluster" / "nodes.yaml"
EXAMPLE_METRICS = EXAMPLES / "cluster" / "metrics.yaml"
SHARED = REPO.parent / "shared"
SCHEDULER_FIXTURES = SHARED / "fixtures" / "kube-scheduler-v1.32"
APISERVER_FIXTURES = SHARED / "fixtures" / "kube-apiserver-v1.32"
