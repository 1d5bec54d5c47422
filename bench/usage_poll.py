"""The cost of one poll of the pods' usage, at 10,000 and 100,000 pods.

Usage: `python bench/usage_poll.py [--pods 10000,100000] [--per-workload 10] [--json FILE]`

One poll is what `PodMetricsPoller` does with metrics-server's answer: decode the PodMetricsList from its
bytes (`cluster/usage/pod_metrics_wire.py`), find each pod's workload among the pods the pod cache knows (their
views), and record the poll in the usage store. Measured in-process on generated pods (`--per-workload`
pods per Deployment), with the store bounded as configured (`--usage-workloads`): a poll's milliseconds
(the median of `--polls`; wall clock and this process's CPU time, the steadier on a shared machine), the
memory the poll allocates at its peak (tracemalloc), and the store's memory after a full window of polls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rulesched.cluster.usage.pod_metrics_wire import pod_usage
from rulesched.cluster.usage.store import UsageOptions, UsageStore, record_usage
from rulesched.rules.pod_values import pod_view

HASH = "5d8f7c9b4"


def make_pods(count: int, per_workload: int) -> list[dict[str, Any]]:
    pods = []
    for index in range(count):
        app = f"app-{index // per_workload}"
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-{HASH}", "controller": True}
        metadata = {
            "name": f"{app}-{HASH}-{index:06d}",
            "namespace": f"team-{(index // per_workload) % 50}",
            "uid": f"uid-{index}",
            "labels": {"app": app, "pod-template-hash": HASH},
            "ownerReferences": [owner],
        }
        resources = {"requests": {"cpu": "500m", "memory": "512Mi"}}
        spec = {"nodeName": f"node-{index % 1000}", "containers": [{"name": "app", "resources": resources}]}
        pods.append({"metadata": metadata, "spec": spec})
    return pods


def pod_metrics(pods: Sequence[dict[str, Any]], poll: int) -> bytes:
    items = []
    for index, pod in enumerate(pods):
        metadata = pod["metadata"]
        usage = {"cpu": f"{100_000_000 + (index * 7919 + poll) % 900_000_000}n", "memory": f"{262144 + index % 4096}Ki"}
        items.append(
            {
                "metadata": {k: metadata[k] for k in ("name", "namespace", "labels")},
                "timestamp": "2026-11-26T12:00:00Z",
                "window": "15s",
                "containers": [{"name": "app", "usage": usage}],
            }
        )
    return json.dumps({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "items": items}).encode()


def one_size(count: int, per_workload: int, polls: int, workloads: int) -> dict[str, Any]:
    pods = make_pods(count, per_workload)
    views = [pod_view(p) for p in pods]
    answers = [pod_metrics(pods, poll) for poll in range(2)]
    store = UsageStore(UsageOptions(max_workloads=workloads))
    seconds, cpu = [], []
    for poll in range(polls):
        started, used = time.perf_counter(), time.process_time()
        record_usage(store, pod_usage(answers[poll % 2]), views)
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    tracemalloc.start()
    record_usage(store, pod_usage(answers[0]), views)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = UsageStore(UsageOptions(max_workloads=workloads))
    for poll in range(kept.options.window):
        record_usage(kept, pod_usage(answers[poll % 2]), views)
    store_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return {
        "pods": count,
        "workloads": -(-count // per_workload),
        "kept": kept.size(),
        "answer MB": round(len(answers[0]) / 1e6, 1),
        "poll ms (median)": round(statistics.median(seconds) * 1000, 1),
        "poll CPU ms (median)": round(statistics.median(cpu) * 1000, 1),
        "poll peak MB": round(peak / 1e6, 1),
        "store MB": round(store_bytes / 1e6, 2),
        "store bytes per workload": round(store_bytes / max(1, kept.size())),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", default="10000,100000")
    parser.add_argument("--per-workload", type=int, default=10)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--usage-workloads", type=int, default=10_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.pods.split(",") if x]
    if not sizes or min(sizes) < 1 or max(sizes) > 200_000 or not 1 <= args.polls <= 20 or args.per_workload < 1:
        parser.error("--pods between 1 and 200000, --polls between 1 and 20, --per-workload >= 1")
    results = [one_size(n, args.per_workload, args.polls, args.usage_workloads) for n in sizes]
    keys = list(results[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---:|" * len(keys))
    for result in results:
        print("| " + " | ".join(str(result[k]) for k in keys) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
