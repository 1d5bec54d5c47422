"""Where the tests find the repository's files, and the recorded real traffic kept in `tests/fixtures/`."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "rules"
EXAMPLES = REPO / "examples"
EXAMPLE_NODES = EXAMPLES / "cluster" / "nodes.yaml"
EXAMPLE_METRICS = EXAMPLES / "cluster" / "metrics.yaml"
FIXTURES = REPO / "tests" / "fixtures"
"""Recordings of real kube-scheduler, kube-apiserver and Prometheus traffic (see its README.md)."""
SCHEDULER_FIXTURES = FIXTURES / "kube-scheduler-v1.32"
SCHEDULER_FIXTURES_NEWEST = FIXTURES / "kube-scheduler-v1.36"
APISERVER_FIXTURES = FIXTURES / "kube-apiserver-v1.32"
POD_FIXTURES = FIXTURES / "kube-apiserver-v1.32-pods"
"""Pods, namespaces and bindings recorded from a real kube-apiserver v1.32 (see its INDEX.md)."""
