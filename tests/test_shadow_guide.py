"""The shadow summary shown in docs/guides/changing-rules-safely.md is what a real server shows.

The shipped rules serve the example cluster, the shipped rules plus the fixed draft are the shadow rules,
and the calls of the example recording are sent to the server as kube-scheduler sent them: GET /shadow
must then give the page's JSON (but for what changes from run to run: times, the directory, the hash).
It is also where replay and the shadow rules meet: they count the same differences.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.cli import main
from rulesched.settings import Settings
from rulesched.tools.recording_read import Recording, read_calls
from tests.paths import EXAMPLES, REPO, RULES
from tests.server import running

GUIDE = REPO / "docs" / "guides" / "changing-rules-safely.md"
DRAFT = EXAMPLES / "drafts" / "drain-zone-b-except-gpu.yaml"
VARYING = ("directory", "book", "since", "made")


def documented_summary() -> dict[str, Any]:
    found = re.search(r"<!-- shadow-summary -->\n```json\n(.*?)\n```", GUIDE.read_text(), re.DOTALL)
    assert found, "the guide lost its shadow-summary block"
    summary: dict[str, Any] = json.loads(found[1])
    return summary


def shadow_rules(directory: Path) -> Path:
    """The shipped rule files and the draft, in one directory."""
    directory.mkdir()
    for rule_file in RULES.glob("*.yaml"):
        shutil.copy(rule_file, directory)
    shutil.copy(DRAFT, directory)
    return directory


def test_the_guides_shadow_summary_is_what_the_server_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = EXAMPLES / "cluster"
    settings = Settings(
        rules_dir=RULES,
        shadow_rules_dir=shadow_rules(tmp_path / "shadow"),
        nodes_file=cluster / "nodes.yaml",
        metrics_file=cluster / "metrics.yaml",
        pods_file=cluster / "pods.yaml",
        namespaces_file=cluster / "namespaces.yaml",
        cluster="off",
    )
    calls = list(read_calls(Recording(EXAMPLES / "recording")))
    with running(settings) as server, httpx.Client(base_url=server.url) as client:
        for call in calls:
            body = {"Pod": call.pod, "Nodes": None, "NodeNames": [c.name for c in call.contexts]}
            assert client.post(f"/{call.verb}", json=body).status_code == 200
        deadline = time.monotonic() + 15
        while True:
            summary = client.get("/shadow").json()
            if sum(sum(c.values()) for c in summary["comparisons"].values()) >= len(calls):
                break
            assert time.monotonic() < deadline, summary
            time.sleep(0.02)
    expected = documented_summary()
    for field in VARYING:
        del summary[field], expected[field]
    assert summary == expected
    # replay of the same recording with the same rules counts the same pods
    capsys.readouterr()
    main(["replay", str(EXAMPLES / "recording"), "--rules", str(RULES), "--rules", str(DRAFT), "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert report["feasibleChanged"] == expected["comparisons"]["filter"]["differs"]
    assert report["unschedulable"] == expected["unschedulable"]["pods"]
