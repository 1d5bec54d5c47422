"""A server without a cluster never imports the kubernetes client (half a second and about 30 MB: the
benchmark's peak RSS), whatever features are merely available: each imports it only when turned on."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, REPO, RULES

BUILD = f"""
import sys
from pathlib import Path
import rulesched.cli
from rulesched.extender.server import build
from rulesched.settings import Settings

build(Settings(rules_dir=Path({str(RULES)!r}), nodes_file=Path({str(EXAMPLE_NODES)!r}),
               metrics_file=Path({str(EXAMPLE_METRICS)!r}), cluster="off"))
print(sorted(name for name in ("kubernetes", "kubernetes_validate", "jsonschema") if name in sys.modules))
"""


def test_a_server_without_a_cluster_does_not_import_the_kubernetes_client() -> None:
    done = subprocess.run([sys.executable, "-c", BUILD], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", "imported at start-up without a cluster"
