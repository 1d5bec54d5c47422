"""`--requeue` against the loopback Kubernetes API: a pod rejected everywhere is nudged (one annotation
patch) soon after a change lets it through: a metrics poll, a rules reload, a node change. Not when
nothing relevant changed, not for a pod bound meanwhile, within the rate limit; a refusal (403, 404, 409,
429) is counted and logged once, never a crash. A real server (uvicorn on 127.0.0.1) answers /filter as
kube-scheduler calls it; the nudges are read from what the API server received.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.settings import Settings
from rulesched.writes.nudge import ANNOTATION
from tests.builders import make_pod
from tests.kubeapi import KubeAPI, wait_for
from tests.server import RunningServer, running

NAMESPACE = "fx-alpha"
NUDGER = "rulesched.controllers.requeue.nudger"
"""The logger of the nudge thread, whose warnings say why nudges are refused."""
CANDIDATES = ["node-a", "node-b", "node-c"]
QUIET_CPU = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: quiet-nodes
spec:
  filters:
  - name: cpu-below-one
    expression: "'cpu' in metrics && metrics.cpu.usage < LIMIT"
    message: node too busy
"""
OPEN_POOL = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: open-pool
spec:
  filters:
  - name: pool-open
    expression: "'pool' in node.metadata.labels && node.metadata.labels['pool'] == 'open'"
    message: pool closed
"""
EMPTY_NODE = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: empty-nodes
spec:
  filters:
  - name: no-pods
    expression: pods.size() == 0
    message: node runs pods
"""
BOUND = 5.0
"""Seconds within which a nudge must follow its change (the issue asks kube-scheduler to bind within 10 s)."""


def busy(api: KubeAPI) -> None:
    for node in ("node-a", "node-b", "node-c", "node-d", "node-e"):
        api.set_usage(node, "3", "1Gi")


@contextlib.contextmanager
def serving(api: KubeAPI, tmp_path: Path, rules: str, **options: Any) -> Iterator[RunningServer]:
    """A server with --requeue over `rules`, its sources synced and its first metrics poll in."""
    directory = tmp_path / "rules"
    directory.mkdir(exist_ok=True)
    (directory / "rules.yaml").write_text(rules)
    defaults: dict[str, Any] = {"metrics_interval": 0.2, "reload_debounce": 0.05, "requeue": True}
    settings = Settings(
        rules_dir=directory, kubeconfig=api.kubeconfig(tmp_path / "kubeconfig"), cluster="on", **(defaults | options)
    )
    with running(settings) as server:
        cluster = server.parts.cluster
        wait_for(lambda: cluster.nodes is not None and cluster.nodes.ready(), what="the node cache")
        wait_for(lambda: cluster.pods is not None and cluster.pods.ready(), what="the pod cache")
        wait_for(lambda: cluster.metrics is not None and cluster.metrics.usage("node-a") is not None, what="metrics")
        yield server


def reject(server: RunningServer, api: KubeAPI, name: str, candidates: list[str] = CANDIDATES) -> None:
    """A pending pod kube-scheduler asks about; rulesched lets it through nowhere."""
    uid = f"uid-{name}"
    api.add_pod(NAMESPACE, name, uid)
    pod = make_pod(name=name, namespace=NAMESPACE, requests={"cpu": "100m"})
    pod["metadata"]["uid"] = uid
    answer = httpx.post(f"{server.url}/filter", json={"Pod": pod, "NodeNames": candidates}, timeout=10).json()
    assert answer["NodeNames"] == [], answer


def nudges(api: KubeAPI, name: str = "", code: int | None = 200) -> list[dict[str, Any]]:
    """The pod patches received (for pod `name`, answered `code`; "" and None: any)."""
    return [
        p
        for p in api.patches()
        if p["path"].split("?")[0].endswith(f"/pods/{name}" if name else "") and code in (None, p["code"])
    ]


def remembered(server: RunningServer) -> int:
    return int(httpx.get(f"{server.url}/rules", timeout=10).json()["requeue"]["rememberedPods"])


def metric(server: RunningServer, name: str) -> float:
    """One sample of the /metrics exposition (0 when absent)."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_metrics_change_nudges_the_pod_once_and_nothing_else_does(
    api: KubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    busy(api)
    caplog.set_level(logging.INFO, logger="rulesched.decision")
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0")) as server:
        reject(server, api, "waiting")
        assert remembered(server) == 1
        # Polls that change nothing the rules care about: evaluated again, never nudged.
        wait_for(lambda: metric(server, "rulesched_requeue_reevaluations_total") >= 3, what="re-evaluations")
        assert nudges(api, code=None) == []

        api.set_usage("node-b", "200m", "1Gi")
        changed = time.monotonic()
        wait_for(lambda: bool(nudges(api, "waiting")), timeout=BOUND, what="the nudge")
        assert time.monotonic() - changed < BOUND
        [patch] = nudges(api, "waiting")
        assert patch["contentType"] == "application/merge-patch+json"
        assert patch["body"]["metadata"]["uid"] == "uid-waiting"
        assert list(patch["body"]["metadata"]["annotations"]) == [ANNOTATION]
        value = patch["body"]["metadata"]["annotations"][ANNOTATION]
        assert re.fullmatch(r"metrics\.[0-9a-f]{16}", value)
        assert api.pod_object(NAMESPACE, "waiting")["metadata"]["annotations"] == {ANNOTATION: value}
        wait_for(lambda: metric(server, 'rulesched_requeue_nudges_total{outcome="patched"}') == 1, what="count")
        assert metric(server, "rulesched_requeue_nudge_delay_seconds_count") == 1
        assert metric(server, "rulesched_requeue_remembered_pods") == 1  # until kube-scheduler asks again

        # More polls with the node still quiet: once per pod, not once per poll.
        seen = metric(server, "rulesched_requeue_reevaluations_total")
        time.sleep(1.0)
        assert len(nudges(api, code=None)) == 1
        assert metric(server, "rulesched_requeue_reevaluations_total") == seen  # a nudged pod waits
    [line] = [r for r in caplog.records if r.name == "rulesched.decision" and "requeue" in r.getMessage()]
    assert line.getMessage() == f"requeue {NAMESPACE}/waiting: passes on node-b after a metrics change; nudge patched"


def ask_again(server: RunningServer, name: str) -> list[str]:
    """kube-scheduler retries the pod (after the nudge): the filter call alone, the pod as it was."""
    pod = make_pod(name=name, namespace=NAMESPACE, requests={"cpu": "100m"})
    pod["metadata"]["uid"] = f"uid-{name}"
    names: list[str] = httpx.post(f"{server.url}/filter", json={"Pod": pod, "NodeNames": CANDIDATES}).json()[
        "NodeNames"
    ]
    return names


def test_a_second_change_that_hashes_the_same_still_writes_a_change(api: KubeAPI, tmp_path: Path) -> None:
    busy(api)
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0")) as server:
        reject(server, api, "waiting")
        writes = api.pod_writes(NAMESPACE, "waiting")
        api.set_usage("node-b", "200m", "1Gi")
        wait_for(lambda: outcomes(server, "patched") == 1, timeout=BOUND, what="the first nudge")
        first = api.pod_object(NAMESPACE, "waiting")["metadata"]["annotations"][ANNOTATION]
        api.set_usage("node-b", "3", "1Gi")
        wait_for(lambda: not _quiet(server), what="the busy sample")
        assert ask_again(server, "waiting") == []  # rejected again: remembered again
        api.set_usage("node-b", "200m", "1Gi")  # the same node, usage and rules: the same digest as before
        wait_for(lambda: outcomes(server, "patched") == 2, timeout=BOUND, what="the second nudge")
        second = api.pod_object(NAMESPACE, "waiting")["metadata"]["annotations"][ANNOTATION]
        assert second != first, "a nudge that writes the value the pod holds is no update for kube-scheduler"
        assert api.pod_writes(NAMESPACE, "waiting") == writes + 2


def outcomes(server: RunningServer, outcome: str) -> float:
    return metric(server, f'rulesched_requeue_nudges_total{{outcome="{outcome}"}}')


def test_two_replicas_that_saw_the_same_change_count_only_what_each_wrote(api: KubeAPI, tmp_path: Path) -> None:
    busy(api)
    with (
        serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0")) as one,
        serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0")) as two,
    ):
        reject(one, api, "waiting")
        pod = make_pod(name="waiting", namespace=NAMESPACE, requests={"cpu": "100m"})
        pod["metadata"]["uid"] = "uid-waiting"  # kube-scheduler retried it, through the Service, on the other replica
        assert httpx.post(f"{two.url}/filter", json={"Pod": pod, "NodeNames": CANDIDATES}).json()["NodeNames"] == []
        writes = api.pod_writes(NAMESPACE, "waiting")
        api.set_usage("node-b", "200m", "1Gi", age=5)  # one sample, the same for both replicas
        wait_for(lambda: len(nudges(api, "waiting", code=None)) == 2, timeout=BOUND, what="a nudge from each replica")
        counted = ("patched", "raced")
        wait_for(lambda: sum(outcomes(s, o) for s in (one, two) for o in counted) == 2, what="both outcomes")
        # Each replica read the pod first: the second wrote another value (a change) or lost the race (409);
        # never a patch that changed nothing counted as patched.
        assert outcomes(one, "patched") + outcomes(two, "patched") == api.pod_writes(NAMESPACE, "waiting") - writes
        values = [p["body"]["metadata"]["annotations"][ANNOTATION] for p in nudges(api, "waiting")]
        assert len(set(values)) == len(values) >= 1


def test_a_rules_reload_that_opens_the_pool_nudges(api: KubeAPI, tmp_path: Path) -> None:
    busy(api)
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0"), metrics_interval=60) as server:
        reject(server, api, "waiting")
        assert nudges(api, code=None) == []
        (tmp_path / "rules" / "rules.yaml").write_text(QUIET_CPU.replace("LIMIT", "100.0"))
        wait_for(lambda: bool(nudges(api, "waiting")), timeout=BOUND, what="the nudge after the reload")
        [patch] = nudges(api, "waiting")
        assert patch["body"]["metadata"]["annotations"][ANNOTATION].startswith("rules.")


def test_a_node_change_nudges_and_a_change_elsewhere_does_not(api: KubeAPI, tmp_path: Path) -> None:
    with serving(api, tmp_path, OPEN_POOL, metrics_interval=60) as server:
        reject(server, api, "waiting", ["node-a", "node-b"])
        api.label_node("node-c", "pool", "open")  # not a candidate of the pod
        wait_for(lambda: _labelled(server, "node-c"), what="the node cache to see the label")
        time.sleep(0.5)
        assert nudges(api, code=None) == []
        api.label_node("node-b", "pool", "open")
        wait_for(lambda: bool(nudges(api, "waiting")), timeout=BOUND, what="the nudge after the node change")
        assert nudges(api, "waiting")[0]["body"]["metadata"]["annotations"][ANNOTATION].startswith("nodes.")


def _labelled(server: RunningServer, name: str) -> bool:
    nodes = server.parts.cluster.nodes
    node = nodes.get(name) if nodes is not None else None
    return node is not None and node["metadata"].get("labels", {}).get("pool") == "open"


def test_pods_leaving_a_candidate_node_nudge(api: KubeAPI, tmp_path: Path) -> None:
    with serving(api, tmp_path, EMPTY_NODE, metrics_interval=60) as server:
        reject(server, api, "waiting", ["node-d"])  # node-d runs two pods (the recorded list)
        api.delete_pod("fx-alpha", "web-0")
        time.sleep(0.5)
        assert nudges(api, code=None) == []  # one pod left there
        api.delete_pod("fx-beta", "sidecar-app")
        wait_for(lambda: bool(nudges(api, "waiting")), timeout=BOUND, what="the nudge after the pods left")
        assert nudges(api, "waiting")[0]["body"]["metadata"]["annotations"][ANNOTATION].startswith("pods.")


def test_a_pod_bound_meanwhile_is_forgotten_and_never_nudged(api: KubeAPI, tmp_path: Path) -> None:
    busy(api)
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0")) as server:
        reject(server, api, "waiting")
        api.bind(NAMESPACE, "waiting", "node-d")  # bound by another scheduler, say
        wait_for(lambda: remembered(server) == 0, what="the pod forgotten")
        api.set_usage("node-b", "200m", "1Gi")
        wait_for(lambda: server.parts.cluster.metrics is not None and _quiet(server), what="the quiet sample")
        time.sleep(0.5)
        assert nudges(api, code=None) == []


def _quiet(server: RunningServer) -> bool:
    metrics = server.parts.cluster.metrics
    usage = metrics.usage("node-b") if metrics is not None else None
    return usage is not None and usage.cpu is not None and usage.cpu < 1.0


def test_a_pod_asked_about_again_is_forgotten_when_it_passes(api: KubeAPI, tmp_path: Path) -> None:
    api.label_node("node-c", "pool", "open")
    with serving(api, tmp_path, OPEN_POOL, metrics_interval=60) as server:
        reject(server, api, "waiting", ["node-a", "node-b"])
        assert remembered(server) == 1
        pod = make_pod(name="waiting", namespace=NAMESPACE)
        pod["metadata"]["uid"] = "uid-waiting"
        answer = httpx.post(f"{server.url}/filter", json={"Pod": pod, "NodeNames": ["node-c"]}, timeout=10).json()
        assert answer["NodeNames"] == ["node-c"]
        wait_for(lambda: remembered(server) == 0, what="the pod forgotten")


def test_nudges_keep_to_the_rate_limit(api: KubeAPI, tmp_path: Path) -> None:
    busy(api)
    limits = {"requeue_rate": 0.5, "requeue_burst": 2, "metrics_interval": 60}
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0"), **limits) as server:
        for i in range(4):
            reject(server, api, f"waiting-{i}")
        (tmp_path / "rules" / "rules.yaml").write_text(QUIET_CPU.replace("LIMIT", "100.0"))
        wait_for(lambda: len(nudges(api)) == 2, timeout=BOUND, what="the burst")
        time.sleep(0.8)  # the next token comes 2 s after the burst: never before, however slow the machine
        assert len(nudges(api)) == 2
        wait_for(lambda: len(nudges(api)) == 3, timeout=BOUND, what="the next nudge")
        assert int(httpx.get(f"{server.url}/rules", timeout=10).json()["requeue"]["queuedNudges"]) <= 1


def test_a_403_is_one_clear_log_line_not_a_crash(
    api: KubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    busy(api)
    api.forbid_patches()
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0"), metrics_interval=60) as server:
        for i in range(3):
            reject(server, api, f"waiting-{i}")
        (tmp_path / "rules" / "rules.yaml").write_text(QUIET_CPU.replace("LIMIT", "100.0"))
        wait_for(lambda: len(nudges(api, code=403)) == 3, timeout=BOUND, what="three refused nudges")
        wait_for(lambda: metric(server, 'rulesched_requeue_nudges_total{outcome="forbidden"}') == 3, what="count")
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        assert remembered(server) == 3  # kept: a later change may nudge them once the overlay is applied
    warnings = [r for r in caplog.records if r.name == NUDGER and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "deploy/overlays/requeue/" in warnings[0].getMessage()
    assert "cannot patch resource" in warnings[0].getMessage()


def test_refusals_are_counted_and_a_404_forgets_the_pod(api: KubeAPI, tmp_path: Path) -> None:
    busy(api)
    api.fail_patches(404, 409, 429)
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0"), metrics_interval=60) as server:
        for i in range(3):
            reject(server, api, f"waiting-{i}")
        (tmp_path / "rules" / "rules.yaml").write_text(QUIET_CPU.replace("LIMIT", "100.0"))
        wait_for(lambda: len(nudges(api, code=None)) == 3, timeout=BOUND, what="three nudges")
        for outcome in ("gone", "raced", "throttled"):
            wait_for(lambda o=outcome: outcomes(server, o) == 1, what=outcome)  # type: ignore[misc]
        assert remembered(server) == 2  # the raced and the throttled ones: the next change may nudge them
        time.sleep(0.5)
        assert len(nudges(api, code=None)) == 3  # nothing sent again without a change


def test_an_unreachable_api_is_a_failed_nudge_counted_and_logged_once(
    api: KubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    busy(api)
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0"), metrics_interval=60) as server:
        for i in range(2):
            reject(server, api, f"waiting-{i}")
        api.go_down()  # every connection dropped: the patch gets no answer
        (tmp_path / "rules" / "rules.yaml").write_text(QUIET_CPU.replace("LIMIT", "100.0"))
        wait_for(lambda: metric(server, 'rulesched_requeue_nudges_total{outcome="failed"}') == 2, timeout=BOUND * 2)
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        assert remembered(server) == 2  # kept for the next change
    failures = [r for r in caplog.records if r.name == NUDGER and r.levelno >= logging.WARNING]
    assert len(failures) == 1, [r.getMessage() for r in failures]
    assert "failed" in failures[0].getMessage()


def test_a_pod_recreated_under_the_name_is_never_touched(api: KubeAPI, tmp_path: Path) -> None:
    busy(api)
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0"), metrics_interval=60) as server:
        reject(server, api, "waiting")
        api.delete_pod(NAMESPACE, "waiting")
        api.add_pod(NAMESPACE, "waiting", "uid-another")
        (tmp_path / "rules" / "rules.yaml").write_text(QUIET_CPU.replace("LIMIT", "100.0"))
        wait_for(lambda: outcomes(server, "conflict") == 1, timeout=BOUND, what="the nudge refused on reading")
        assert nudges(api, code=None) == []  # the read showed another uid: no patch at all
        assert ANNOTATION not in api.pod_object(NAMESPACE, "waiting")["metadata"].get("annotations", {})
        assert remembered(server) == 0


def test_requeue_needs_a_cluster() -> None:
    with pytest.raises(ValueError, match="--requeue needs a cluster"):
        Settings(requeue=True, cluster="off")


def test_requeue_is_off_by_default(api: KubeAPI, tmp_path: Path) -> None:
    assert Settings().requeue is False
    busy(api)
    with serving(api, tmp_path, QUIET_CPU.replace("LIMIT", "1.0"), requeue=False) as server:
        reject(server, api, "waiting")
        assert "requeue" not in httpx.get(f"{server.url}/rules", timeout=10).json()
        api.set_usage("node-b", "200m", "1Gi")
        wait_for(lambda: _quiet(server), what="the quiet sample")
        time.sleep(0.3)
        assert nudges(api, code=None) == []
        assert "rulesched_requeue" not in httpx.get(f"{server.url}/metrics", timeout=10).text
