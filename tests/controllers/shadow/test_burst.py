"""Shadow rules keep up with a burst: every call of a back-to-back burst is compared, of the state it was answered on.

Counts only, never durations: each burst is bounded in calls, and every wait is a generous bounded poll of
`GET /shadow`. The live rules and the shadow rules differ in the known ways of `tests/rulebooks.py`, so
every count follows from them; where the shadow rules equal the live ones, every comparison must be `same`.
"""

from __future__ import annotations

import datetime
import shutil
import time
from pathlib import Path
from typing import Any

import httpx

from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.metrics.metrics_server import MetricsServerSource
from rulesched.cluster.nodes.nodecache import NodeCache
from rulesched.cluster.pods.index import PodIndex
from rulesched.controllers.shadow import Shadow
from rulesched.controllers.shadow.metrics import ShadowMetrics
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.handoff.answered import Answered
from rulesched.handoff.idle import Idle
from rulesched.rules.cel import make_engine
from rulesched.rules.loader import load_rule_book
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings
from tests.builders import make_pod
from tests.controllers.shadow.test_shadow import settings as shadow_settings
from tests.kubeapi import KubeAPI, wait_for
from tests.paths import RULES
from tests.rulebooks import CLASSIC, SHADOW, SURVIVORS, names_args, pod, rules_dir
from tests.server import RunningServer, running

WAIT_SECONDS = 30.0
PODS = 100
"""Pods in a burst: 200 calls, many times the queue of `QUEUE` calls the tests leave the shadow thread."""
QUEUE = 8
"""A shadow queue far smaller than a burst: only comparisons made as the calls come keep up."""
RATE = 65.0
"""Pods a second: a real kube-scheduler's 500-pod burst, limited by its API server."""
PER_POD = SHADOW.replace(
    "  scores:",
    "  - name: named\n    expression: pod.metadata.name != 'nobody'\n    message: never\n  scores:",
)
"""The shadow rules, and a filter reading the pod's name: every pod is new work for the shadow book."""


def settings(tmp_path: Path, shadow: str = SHADOW, **overrides: Any) -> Settings:
    """`test_shadow.py`'s server (the example cluster, the live rules), with `shadow` as its shadow rules."""
    options: dict[str, Any] = {"shadow_rules_dir": rules_dir(tmp_path / "shadow", shadow), "shadow_queue": QUEUE}
    return shadow_settings(tmp_path, **(options | overrides))


def summary_after(client: httpx.Client, total: int) -> dict[str, Any]:
    """GET /shadow once `total` calls were compared or dropped and nothing waits (bounded wait)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        summary: dict[str, Any] = client.get("/shadow").json()
        if summary["compared"]["calls"] >= total and summary["queue"]["waiting"] == 0:
            return summary
        assert time.monotonic() < deadline, summary
        time.sleep(0.05)


def burst(server: RunningServer, *, rate: float | None = None, batch_every: int = 10) -> int:
    """Filter then prioritize for `PODS` pods over one keep-alive connection, as kube-scheduler sends them:
    back to back, or at most `rate` pods a second. Every `batch_every`-th pod is a batch pod. The calls sent."""
    sent = 0
    next_at = time.monotonic()
    with httpx.Client(base_url=server.url) as client:
        for index in range(PODS):
            if rate:
                time.sleep(max(0.0, next_at - time.monotonic()))
                # A pod sent late (a loaded machine: the calls before it took longer than 1 / rate) moves the next
                # one back, rather than have the pods after it sent back to back to catch up: that is a burst, the
                # test above's (its queue holds it), and it overflowed this test's queue of `QUEUE` calls.
                next_at = max(next_at, time.monotonic()) + 1 / rate
            one = pod(f"burst-{index}", batch=index % batch_every == 0)
            assert client.post("/filter", json=names_args(one, CLASSIC)).json()["NodeNames"] == SURVIVORS
            assert client.post("/prioritize", json=names_args(one, SURVIVORS)).status_code == 200
            sent += 2
    return sent


def assert_every_call_compared(summary: dict[str, Any], metrics: str) -> None:
    """All `PODS` pods compared, with the known differences: every filter loses k8s-node1, every prioritize
    moves its top node, and the batch pods (one in ten) would be unschedulable."""
    assert summary["comparisons"] == {
        "filter": {"same": 0, "differs": PODS, "dropped": 0},
        "prioritize": {"same": 0, "differs": PODS, "dropped": 0},
    }
    assert summary["compared"] == {"calls": 2 * PODS, "compared": 2 * PODS, "dropped": 0}
    assert summary["topNodeChanges"] == PODS
    assert summary["unschedulable"]["pods"] == PODS // 10
    assert summary["headline"] == [
        f"{PODS} of {PODS} filter calls compared pass other nodes",
        f"{PODS // 10} pods unschedulable ({PODS // 10} of {PODS} filter calls compared)",
        f"{PODS} of {PODS} prioritize calls compared change their top node",
        f"{2 * PODS} of {2 * PODS} calls compared, 0 dropped",
    ]
    assert f'rulesched_shadow_comparisons_total{{outcome="differs",verb="filter"}} {float(PODS)}' in metrics
    assert 'rulesched_shadow_comparisons_total{outcome="dropped",verb="filter"}' not in metrics


def test_a_back_to_back_burst_is_compared_call_for_call(tmp_path: Path) -> None:
    """No pause between calls: before, the shadow thread waited for a pause that never came and dropped all
    but the queue's worth; now the comparisons are made on the event loop, in the gaps between the calls and
    the pause after them, and the queue (its default, 2048 calls) holds the burst meanwhile."""
    options = settings(tmp_path, shadow_queue=Settings().shadow_queue)
    with running(options) as server, httpx.Client(base_url=server.url) as client:
        sent = burst(server)
        summary = summary_after(client, sent)
        assert_every_call_compared(summary, client.get("/metrics").text)
    assert summary["made"]["betweenCalls"] == sent
    assert summary["queue"] == {"waiting": 0, "capacity": 2048}


def test_a_burst_at_kube_schedulers_rate_drops_nothing(tmp_path: Path) -> None:
    with running(settings(tmp_path)) as server, httpx.Client(base_url=server.url) as client:
        sent = burst(server, rate=RATE)
        assert_every_call_compared(summary_after(client, sent), client.get("/metrics").text)


def test_true_overload_drops_comparisons_and_says_how_many_were_made(tmp_path: Path) -> None:
    """Shadow work that is never small (`--shadow-inline-work 0`, a shadow rule reading each pod's name) goes
    to the shadow thread, which works only in pauses; a back-to-back burst overflows its queue of one."""
    options = settings(tmp_path, PER_POD, shadow_queue=1, shadow_inline_work=0)
    with running(options) as server, httpx.Client(base_url=server.url) as client:
        sent = burst(server)
        summary = summary_after(client, sent)
        metrics = client.get("/metrics").text
    compared, dropped = summary["compared"]["compared"], summary["compared"]["dropped"]
    assert compared + dropped == sent == 2 * PODS
    assert dropped > 0
    counts = summary["comparisons"]
    assert counts["filter"]["same"] == counts["prioritize"]["same"] == 0  # each comparison made found the difference
    made = summary["made"]
    assert made["betweenCalls"] + made["thread"] == compared  # a prioritize call's scores may be in the caches
    assert made["thread"] > 0
    filtered = counts["filter"]["differs"]
    assert summary["headline"][0] == f"{filtered} of {filtered} filter calls compared pass other nodes"
    assert summary["headline"][-1] == f"{compared} of {sent} calls compared, {dropped} dropped"
    exposed = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('rulesched_shadow_comparisons_total{outcome="dropped"')
    )
    assert exposed == dropped


# The same state: the shadow decision is made of what the live one saw, whatever changed since.

SAMPLE_RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: quiet-nodes
spec:
  filters:
  - name: quiet
    expression: "!has(metrics.cpu) || metrics.cpu.usage + recent.requests.cpu < 4.0"
    message: too busy
  scores:
  - name: least-busy
    expression: "has(metrics.cpu) ? -(metrics.cpu.usage + recent.requests.cpu) : 0.0"
"""
"""Rules that read the metrics sample and `recent`: the live and the shadow book, identical."""


def test_a_comparison_uses_the_state_the_live_call_saw_not_a_later_one(
    access: KubeAccess, api: KubeAPI, cache: NodeCache, tmp_path: Path
) -> None:
    """Between the live call and its comparison, a placement counts in `recent` and a metrics poll sees
    node-a busy: decided again on the state of now, the call would come out otherwise; compared, it is the same."""
    directory = rules_dir(tmp_path / "rules", SAMPLE_RULES)
    metrics_source = MetricsServerSource(access.api, interval=3600, max_age=90)
    pods = PodIndex(recent_seconds=600)
    contexts = NodeContexts(cache, metrics_source, pods)
    assert metrics_source.poll()
    book = load_rule_book([directory], make_engine("cpp"))
    store = RuleStore([directory], make_engine("cpp"))
    assert store.reload() == "loaded"
    shadow = Shadow(store, Idle(), ShadowMetrics(), capacity=QUEUE, deadline=5.0, inline_work=2000.0)
    replica = make_pod(name="web-1", namespace="fx-alpha", requests={"cpu": "3"})
    names = ["node-a", "node-b"]
    now = datetime.datetime.now(datetime.UTC)
    seen, _ = contexts.for_names(names)
    live = evaluate(prepared(book), Call(replica, seen, Verb.PRIORITIZE, now))
    answered = Answered("prioritize", False, replica, seen, {}, None, now, book, live)

    pods.reserve(replica, live.top(1)[0][0])  # the placement the answer leads to
    api.set_usage("node-a", "3", "1Gi")
    assert metrics_source.poll()
    later, _ = contexts.for_names(names)
    assert evaluate(prepared(book), Call(replica, later, Verb.PRIORITIZE, now)).scores() != live.scores()

    try:
        shadow.submit(answered)
        wait_for(lambda: shadow.summary.as_dict()["compared"]["calls"] == 1, what="the comparison")
    finally:
        shadow.stop()
    assert shadow.summary.as_dict()["comparisons"]["prioritize"] == {"same": 1, "differs": 0, "dropped": 0}


def test_identical_books_compare_same_through_a_burst_of_placements_and_polls(api: KubeAPI, tmp_path: Path) -> None:
    """Replicas through filter, prioritize and bind against a loopback API, node-a's usage changing between
    them: each prioritize answer counts its pod in `recent` before the comparisons that follow it are made,
    and the bindings and polls change the pods and metrics; the shadow book (the live rules again) must
    still decide every call as the live one did."""
    live, shadow_dir = tmp_path / "live", tmp_path / "shadow"
    for directory in (live, shadow_dir):
        directory.mkdir()
        shutil.copy(RULES / "xy-least-cpu.yaml", directory)
    for node, cpu in (("node-a", "250m"), ("node-b", "1500m"), ("node-c", "150m"), ("node-d", "12")):
        api.set_usage(node, cpu, "1Gi", age=20)
    options = Settings(
        rules_dir=live,
        shadow_rules_dir=shadow_dir,
        kubeconfig=api.kubeconfig(tmp_path / "kubeconfig"),
        cluster="on",
        enable_bind=True,
        metrics_interval=1,
    )
    replicas = 20
    with running(options) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        cluster = server.parts.cluster
        wait_for(lambda: cluster.pods is not None and cluster.pods.ready(), what="the pod cache")
        wait_for(lambda: cluster.metrics is not None and cluster.metrics.usage("node-d") is not None, what="metrics")
        for replica in range(replicas):
            schedule(client, api, replica)
            api.set_usage("node-a", f"{250 + 100 * replica}m", "1Gi")
        summary = summary_after(client, 2 * replicas)
    assert summary["comparisons"] == {
        "filter": {"same": replicas, "differs": 0, "dropped": 0},
        "prioritize": {"same": replicas, "differs": 0, "dropped": 0},
    }


def schedule(client: httpx.Client, api: KubeAPI, replica: int) -> None:
    """One scheduling cycle: filter, prioritize, bind to the node ranked first."""
    name, uid = f"burst-{replica}", f"uid-burst-{replica}"
    api.add_pod("fx-alpha", name, uid, cpu="1")
    one: dict[str, Any] = make_pod(name=name, namespace="fx-alpha", labels={"app": "web"}, requests={"cpu": "1"})
    one["metadata"]["uid"] = uid
    passed = client.post("/filter", json={"Pod": one, "NodeNames": ["node-a", "node-b", "node-c", "node-d"]})
    scores = client.post("/prioritize", json={"Pod": one, "NodeNames": passed.json()["NodeNames"]}).json()
    best = max(scores, key=lambda s: s["Score"])["Host"]
    body = {"PodName": name, "PodNamespace": "fx-alpha", "PodUID": uid, "Node": best}
    assert client.post("/bind", json=body).json() == {"Error": ""}
