"""A recording keeps the estimate each call saw: replay evaluates with it, and a RuleTest made from a
recorded decision gives it in the case (`estimate:`), so that both decide as the live rules did."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from rulesched.cli import main
from rulesched.tools.recording_read import Recording, read_calls, segments_of
from tests.builders import make_pod
from tests.cluster.test_usage import owned, shop_settings
from tests.server import running


def test_a_recorded_estimate_is_replayed_and_written_into_the_ruletest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = tmp_path / "recording"
    settings = shop_settings(tmp_path, record_dir=recording)
    [rules] = settings.rules_dir
    batch = owned(make_pod("batch-new", "shop", None, {"cpu": "500m"}), "Job", "batch")
    with running(settings) as server, httpx.Client(base_url=server.url) as client:
        answer = client.post("/filter", json={"Pod": batch, "NodeNames": ["k8s-node1", "k8s-node2"]}).json()
    assert answer["NodeNames"] == [], "the batch pod will use 1.5 cores: the rule rejects every node"
    calls = list(read_calls(Recording(recording, segments_of(recording))))
    assert [c.estimate for c in calls] == [{"cpu": 1.521093117, "memory": 553648128.0, "samples": 1.0}]
    # Without the recorded estimate the pod would count its requests (500m) and pass: replay agrees with live.
    assert main(["replay", str(recording), "--rules", str(rules), "--fail-on", "feasible_changed>0"]) == 0
    out = tmp_path / "incident"
    assert (
        main(["replay", str(recording), "--rules", str(rules), "--to-ruletest", "shop/batch-new", "--out", str(out)])
        == 0
    )
    capsys.readouterr()
    case = yaml.safe_load((out / "batch-new.yaml").read_text())["spec"]["cases"][0]
    assert case["estimate"] == calls[0].estimate
    assert main(["test", str(out / "batch-new.yaml")]) == 0
