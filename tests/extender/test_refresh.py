"""Refresh ahead: after a metrics poll, the nodes last asked about are made ready before a request asks.

A real server polls the loopback API's metrics-server every 0.2 s; `rulesched_refreshed_nodes_total`
counts the nodes made ready between requests, and the answers after a poll follow the new samples.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.settings import Settings
from tests.controllers.shadow.test_shadow import settings
from tests.kubeapi import KubeAPI, wait_for
from tests.paths import EXAMPLES, RULES
from tests.rulebooks import CLASSIC, LIVE, SHADOW, names_args, pod, rules_dir
from tests.server import running, running_server

POD = json.loads((EXAMPLES / "pod.json").read_text())
CANDIDATES = ["node-a", "node-b", "node-e"]
_REFRESHED = re.compile(r"^rulesched_refreshed_nodes_total (\S+)$", re.MULTILINE)
_CALLS = re.compile(r"^rulesched_refreshed_calls_total (\S+)$", re.MULTILINE)


def refreshed(client: httpx.Client, counter: re.Pattern[str] = _REFRESHED) -> float:
    found = counter.search(client.get("/metrics").text)
    assert found is not None
    return float(found.group(1))


def names(candidates: list[str]) -> dict[str, Any]:
    return {"Pod": POD, "Nodes": None, "NodeNames": candidates}


def scores(client: httpx.Client) -> dict[str, int]:
    answer = client.post("/prioritize", json=names(CANDIDATES)).json()
    return {entry["Host"]: entry["Score"] for entry in answer}


@pytest.mark.parametrize("refresh_ahead", [True, False], ids=["on", "off"])
def test_a_metrics_poll_makes_the_nodes_last_asked_about_ready_before_the_next_request(
    api: KubeAPI, tmp_path: Path, refresh_ahead: bool
) -> None:
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    settings = Settings(
        rules_dir=RULES, kubeconfig=kubeconfig, cluster="on", metrics_interval=0.2, refresh_ahead=refresh_ahead
    )
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=30) as client:
        wait_for(lambda: client.get("/readyz").status_code == 200, what="/readyz")
        assert client.post("/filter", json=names(CANDIDATES)).json()["NodeNames"] == CANDIDATES
        before = scores(client)
        assert before["node-a"] > before["node-b"]  # node-a is the idlest (250m against 1500m)
        count, calls = refreshed(client), refreshed(client, _CALLS)
        api.set_usage("node-a", "3", "1Gi")
        if refresh_ahead:
            wait_for(lambda: refreshed(client) >= count + len(CANDIDATES), what="the nodes made ready")
            # The last prioritize call evaluated again: the next one with its candidates finds its verdicts.
            wait_for(lambda: refreshed(client, _CALLS) > calls, what="the last prioritize call made again")
        else:
            time.sleep(1.0)  # five polls
            assert (refreshed(client), refreshed(client, _CALLS)) == (count, calls)
        after = scores(client)
    assert after["node-a"] < after["node-b"], "the answer after the poll does not follow the new sample"


def test_a_reload_of_the_shadow_rules_alone_leaves_the_live_results_alone(tmp_path: Path) -> None:
    """Before, a reload of the shadow rules made every live result again and evaluated the last prioritize call
    again, as a live reload does: work on the event loop that held up the requests arriving meanwhile for
    nothing. Now the nodes are only handed to the shadow book; a live reload still does both."""
    options = settings(tmp_path, shadow_rules_dir=rules_dir(tmp_path / "shadow", SHADOW))
    with running(options) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        extender = server.parts.app.state.extender
        assert client.post("/prioritize", json=names_args(pod("web-1"), CLASSIC)).status_code == 200
        nodes, calls = refreshed(client), refreshed(client, _CALLS)
        (tmp_path / "shadow" / "rules.yaml").write_text(LIVE)
        assert extender.shadow.store.reload() == "loaded"
        wait_for(lambda: refreshed(client) >= nodes + len(CLASSIC), what="the nodes handed to the shadow book")
        time.sleep(0.2)  # ten looks at the generations: a prioritize call made again would be counted by now
        assert refreshed(client, _CALLS) == calls
        (tmp_path / "live" / "rules.yaml").write_text(SHADOW)
        assert extender.store.reload() == "loaded"
        wait_for(lambda: refreshed(client, _CALLS) > calls, what="the last prioritize call made again")
