"""A call finds the pod's `estimate` only when the book's rules read it (`Plan.reads_estimate`): rules that read it
see the usage store's, and the shadow book and the recording get it too when the live rules read none (found once
the answer is sent)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from rulesched.decide.fast import prepared
from rulesched.rules.cel import make_engine
from rulesched.tools.recording_read import Recording, read_calls, segments_of
from tests.builders import load_spec, make_pod
from tests.cluster.test_usage import ESTIMATE_RULES, owned, shop_settings
from tests.rulebooks import rules_dir
from tests.server import running

NODE_ONLY = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: named-nodes
spec:
  filters:
  - name: named
    expression: node.metadata.name != ''
    message: a node without a name
"""

BATCH_CPU = 1.521093117
"""What the pod metrics fixture's batch pods use: a new pod of the batch Job is estimated at that (≥ 1 core)."""


@pytest.mark.parametrize(
    ("spec", "reads"),
    [
        ("filters:\n- name: light\n  expression: estimate.cpu < 1.0\n", True),
        ("scores:\n- name: light\n  expression: -estimate.memory\n", True),
        (
            "variables:\n- name: cpu\n  expression: estimate.cpu\n"
            "filters:\n- name: light\n  expression: variables.cpu < 1.0\n",
            True,
        ),
        ("filters:\n- name: small\n  expression: \"'cpu' in requests && requests.cpu < 1.0\"\n", False),
        ("filters:\n- name: labelled\n  expression: has(node.metadata.labels)\n", False),
    ],
)
def test_a_plan_reads_the_estimate_only_when_a_rule_or_variable_does(tmp_path: Path, spec: str, reads: bool) -> None:
    assert prepared(load_spec(tmp_path, make_engine("cpp"), spec)).reads_estimate is reads


def test_shadow_rules_and_the_recording_get_the_learnt_estimate_when_the_live_rules_read_none(tmp_path: Path) -> None:
    settings = shop_settings(tmp_path, shadow_rules_dir=rules_dir(tmp_path / "shadow", ESTIMATE_RULES))
    recording = tmp_path / "recording"
    settings = settings.model_copy(
        update={"rules_dir": (rules_dir(tmp_path / "live", NODE_ONLY),), "record_dir": recording}
    )
    batch = owned(make_pod("batch-new", "shop", None, {"cpu": "500m"}), "Job", "batch")
    with running(settings) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        answer = client.post("/filter", json={"Pod": batch, "NodeNames": ["k8s-node1"]}).json()
        assert answer["NodeNames"] == ["k8s-node1"], "the live rules read no estimate"
        deadline = time.monotonic() + 15
        while (summary := client.get("/shadow").json())["comparisons"]["filter"]["differs"] < 1:
            assert time.monotonic() < deadline, f"no comparison: {json.dumps(summary)}"
            time.sleep(0.02)
    # Its requests (500m, the fallback) would pass: the shadow rules saw what the batch pods use.
    assert summary["rejections"]["shadow"] == {"light-pods-only/uses-under-a-core": 1}
    [call] = read_calls(Recording(recording, segments_of(recording)))
    assert call.estimate == {"cpu": pytest.approx(BATCH_CPU), "memory": 553648128.0, "samples": 1.0}
