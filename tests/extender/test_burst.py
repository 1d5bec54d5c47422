"""A burst of replicas through filter → prioritize → bind, as kube-scheduler drives the extender.

The metrics do not change during the burst (metrics-server samples every 15-60 s). With the founding rule
set as shipped (`metrics.cpu.usage + recent.estimates.cpu`), the replicas spread over the labelled nodes;
with usage alone (the rule set before issue #13), every replica lands on the node that looked least busy.
Bindings go through the loopback API, so the pod watch sees them, as it would in a cluster.
"""

from __future__ import annotations

import collections
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.cluster.pods.index import PodIndex
from rulesched.decide.decision import Decision, NodeDecision
from rulesched.extender.hand_on import reserve
from rulesched.settings import Settings
from tests.builders import make_pod
from tests.kubeapi import KubeAPI, wait_for
from tests.paths import RULES
from tests.server import RunningServer, running

REPLICAS = 30
CANDIDATES = ["node-a", "node-b", "node-c", "node-d"]
"""node-e is left out, as kube-scheduler's taint filter leaves it out (dedicated=infra:NoSchedule)."""


def settings(api: KubeAPI, tmp_path: Path, rules: Path) -> Settings:
    return Settings(
        rules_dir=rules,
        kubeconfig=api.kubeconfig(tmp_path / "kubeconfig"),
        cluster="on",
        enable_bind=True,
        metrics_interval=60,
    )


def founding_rules(tmp_path: Path, usage_only: bool) -> Path:
    directory = tmp_path / ("before" if usage_only else "after")
    directory.mkdir()
    text = (RULES / "xy-least-cpu.yaml").read_text()
    if usage_only:
        text = text.replace("metrics.cpu.usage + recent.estimates.cpu", "metrics.cpu.usage")
        assert "recent" not in text.split("variables:")[1]
    (directory / "xy-least-cpu.yaml").write_text(text)
    return directory


def steady_metrics(api: KubeAPI) -> None:
    """One sample per node, taken 20 s ago, that does not change during the test."""
    for node, cpu in (
        ("node-a", "250m"),
        ("node-b", "1500m"),
        ("node-c", "150m"),
        ("node-d", "12"),
        ("node-e", "100m"),
    ):
        api.set_usage(node, cpu, "1Gi", age=20)


def schedule(server: RunningServer, api: KubeAPI, replica: int) -> str:
    """One scheduling cycle of replica `replica`: filter, prioritize, then bind to the best node."""
    name, uid = f"burst-{replica}", f"uid-burst-{replica}"
    api.add_pod("fx-alpha", name, uid, cpu="1")
    pod: dict[str, Any] = make_pod(name=name, namespace="fx-alpha", labels={"app": "web"}, requests={"cpu": "1"})
    pod["metadata"]["uid"] = uid
    with httpx.Client(base_url=server.url, timeout=10) as client:
        passed = client.post("/filter", json={"Pod": pod, "NodeNames": CANDIDATES}).json()["NodeNames"]
        scores = client.post("/prioritize", json={"Pod": pod, "NodeNames": passed}).json()
        best = max(scores, key=lambda s: s["Score"])["Host"]  # ties: the first, as good as kube-scheduler's pick
        body = {"PodName": name, "PodNamespace": "fx-alpha", "PodUID": uid, "Node": best}
        assert client.post("/bind", json=body).json() == {"Error": ""}
    return str(best)


def burst(server: RunningServer, api: KubeAPI) -> collections.Counter[str]:
    cluster = server.parts.cluster
    assert cluster.metrics is not None
    assert cluster.pods is not None
    wait_for(lambda: cluster.pods is not None and cluster.pods.ready(), what="the pod cache")
    wait_for(lambda: cluster.metrics is not None and cluster.metrics.usage("node-d") is not None, what="metrics")
    return collections.Counter(schedule(server, api, replica) for replica in range(REPLICAS))


@pytest.mark.parametrize("usage_only", [True, False], ids=["usage-only", "burst-aware"])
def test_a_burst_of_replicas_spreads_with_the_founding_rules(api: KubeAPI, tmp_path: Path, usage_only: bool) -> None:
    steady_metrics(api)
    with running(settings(api, tmp_path, founding_rules(tmp_path, usage_only))) as server:
        placed = burst(server, api)
        if usage_only:
            assert placed == {"node-a": REPLICAS}, "without recent, every replica piles onto the least busy node"
            return
        assert set(placed) == {"node-a", "node-b", "node-d"}, placed  # node-c lacks the filter.xy.com label
        assert max(placed.values()) <= 15, placed
        # Each node's estimated usage (the sample plus the replicas' requests) ends level, within one replica.
        estimate = {
            "node-a": 0.25 + placed["node-a"],
            "node-b": 1.5 + placed["node-b"],
            "node-d": 12 + placed["node-d"],
        }
        assert max(estimate.values()) - min(estimate.values()) <= 1.0, estimate
        pods = server.parts.cluster.pods
        assert pods is not None
        wait_for(lambda: sum(int(pods.node_pods(n, None).allocated["pods"]) for n in placed) == REPLICAS + 2)
        checks = httpx.get(f"{server.url}/readyz").json()["checks"]
        assert (checks["podCache"], checks["namespaceCache"]) == (True, True)
        sources = httpx.get(f"{server.url}/rules").json()["sources"]
        assert sources["pods"]["objects"] == REPLICAS + 2
        assert (sources["pods"]["failing"], sources["pods"]["relists"]) == (False, 1)
        assert sources["namespaces"]["objects"] == 8
        url = f"{server.url}/rules"
        wait_for(
            lambda: httpx.get(url).json()["sources"]["pods"]["pendingPlacements"] == 0,
            what="every placement confirmed by the pod watch",
        )
        exposition = httpx.get(f"{server.url}/metrics").text
        assert f'rulesched_source_objects{{source="pods"}} {REPLICAS + 2}.0' in exposition


def test_the_shipped_rules_directory_serves_the_burst(api: KubeAPI, tmp_path: Path) -> None:
    """The whole shipped rule directory (not only the founding set) keeps the burst spread."""
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules, ignore=shutil.ignore_patterns("tests"))
    steady_metrics(api)
    with running(settings(api, tmp_path, rules)) as server:
        placed = burst(server, api)
    assert len(placed) >= 3, placed


def test_placements_ranked_first_count_until_they_expire(api: KubeAPI, tmp_path: Path) -> None:
    """No binding yet (kube-scheduler binds after the extender's answer): the node this extender ranked
    first counts the pod in `recent` at once, until the pod watch shows it or `recent_seconds` pass."""
    steady_metrics(api)
    config = settings(api, tmp_path, founding_rules(tmp_path, False)).model_copy(update={"recent_seconds": 1.0})
    with running(config) as server:
        pods = server.parts.cluster.pods
        assert pods is not None
        wait_for(pods.ready, what="the pod cache")
        wait_for(
            lambda: (
                server.parts.cluster.metrics is not None and server.parts.cluster.metrics.usage("node-d") is not None
            )
        )

        def ranked_first(replica: int) -> str:
            pod = make_pod(name=f"r-{replica}", namespace="fx-alpha", requests={"cpu": "1"})
            pod["metadata"]["uid"] = f"uid-r-{replica}"
            scores = httpx.post(f"{server.url}/prioritize", json={"Pod": pod, "NodeNames": ["node-a", "node-b"]}).json()
            return str(max(scores, key=lambda s: s["Score"])["Host"])

        assert [ranked_first(r) for r in range(4)] == ["node-a", "node-a", "node-b", "node-a"]
        assert ranked_first(0) == "node-a", "asking again for the same pod replaces its own placement"
        wait_for(lambda: pods.node_pods("node-a", None).recent["count"] == 0.0, what="the placements expired")
        assert ranked_first(10) == "node-a"


def test_a_pod_bound_through_bind_counts_before_the_watch_shows_it(api: KubeAPI, tmp_path: Path) -> None:
    """A tie at the top of /prioritize counts the pod nowhere (kube-scheduler's own scores pick the node);
    the /bind that follows counts it, with its requests, on that node at once, not only once the pod
    watch shows it bound."""
    for node in ("node-a", "node-b"):
        api.set_usage(node, "1", "1Gi", age=20)
    with running(settings(api, tmp_path, founding_rules(tmp_path, False))) as server:
        pods = server.parts.cluster.pods
        assert pods is not None
        wait_for(pods.ready, what="the pod cache")
        samples = server.parts.cluster.metrics
        assert samples is not None
        wait_for(lambda: samples.usage("node-b") is not None, what="metrics")
        pods.stop()  # the watch falls behind: only the binding itself can count the pod
        api.add_pod("fx-alpha", "tied-0", "uid-tied-0", cpu="1")
        pod = make_pod(name="tied-0", namespace="fx-alpha", requests={"cpu": "1"})
        pod["metadata"]["uid"] = "uid-tied-0"
        scores = httpx.post(f"{server.url}/prioritize", json={"Pod": pod, "NodeNames": ["node-a", "node-b"]}).json()
        assert scores[0]["Score"] == scores[1]["Score"]
        assert pods.node_pods("node-b", None).recent["count"] == 0.0, "a tie places the pod nowhere"
        body = {"PodName": "tied-0", "PodNamespace": "fx-alpha", "PodUID": "uid-tied-0", "Node": "node-b"}
        assert httpx.post(f"{server.url}/bind", json=body).json() == {"Error": ""}
        recent = pods.node_pods("node-b", None).recent
        assert (recent["count"], recent["requests"]["cpu"]) == (1.0, 1.0)
        assert httpx.get(f"{server.url}/rules").json()["sources"]["pods"]["pendingPlacements"] == 1


@pytest.mark.parametrize(
    ("scores", "counted_on"),
    [
        ({"node-a": 3, "node-b": 7, "node-c": 5}, "node-b"),
        ({"node-a": 7, "node-b": 7, "node-c": 5}, None),  # a tie: kube-scheduler's own scores decide
        ({"node-a": 2, "node-b": None}, "node-a"),  # a node without a score counts as 0
        ({"node-a": 0, "node-b": None}, None),
        ({"node-a": None}, "node-a"),
    ],
)
def test_a_pod_counts_on_the_one_node_ranked_first_and_on_none_when_tied(
    scores: dict[str, int | None], counted_on: str | None
) -> None:
    index = PodIndex()
    decision = Decision(1, [], {name: NodeDecision(name, score=score) for name, score in scores.items()})
    pod = make_pod(name="r-0", requests={"cpu": "1"})
    reserve(index, pod, decision)
    counted = {name for name in scores if index.node_pods(name, None).recent["count"] == 1.0}
    assert counted == ({counted_on} if counted_on else set())
