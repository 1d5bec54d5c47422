"""The burst scenario: replicas of one Deployment whose placements feed `recent` and `pods` between requests.

Usage: `python bench/burst.py [--nodes 1000] [--replicas 60] [--json FILE]`

In-process, without HTTP (`bench/run.py` runs it after its HTTP scenarios, or alone with `--only burst`):
names-mode node contexts over the seeded nodes of `bench/workload.py` and a pod index, as the server keeps
them. Each replica is one filter and one
prioritize evaluation; then the node ranked first gets the replica as a pending placement, and the
replica shows up bound there (as the pod watch would deliver it). Every placement changes one node, whose
context is rebuilt on the next request. Each rule set also runs "steady": the same replicas with no pod
event between them (what every request cost before pods were followed). Bounded in count and time.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import FOUNDING_RULES, make_workload
from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.sources import FileMetricsSource, FileNodeSource
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call, Verb
from rulesched.rules.cel import make_engine
from rulesched.rules.loader import load_rule_book

BURST_RULES = FOUNDING_RULES.replace(
    "expression: metrics.cpu.usage", "expression: metrics.cpu.usage + recent.requests.cpu"
)
SPREAD_RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: spread
spec:
  filters:
  - name: at-most-three-replicas
    expression: >-
      pods.filter(p, 'app' in p.metadata.labels && has(pod.metadata.labels) && 'app' in pod.metadata.labels
      && p.metadata.labels['app'] == pod.metadata.labels['app']).size() < 3
    message: three replicas already
"""
RULE_SETS = {
    "founding (usage only)": (FOUNDING_RULES,),
    "founding (usage + recent)": (BURST_RULES,),
    "founding + recent + pods spread": (BURST_RULES, SPREAD_RULES),
}
MAX_SECONDS = 120.0
"""The whole run stops after this long, whatever is left."""


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def one_run(
    rules: Sequence[str], files: Path, names: list[str], pods: list[dict[str, Any]], *, burst: bool
) -> dict[str, Any]:
    """Each replica's filter + prioritize time (ms), and where the replicas went."""
    directory = files / f"rules-{abs(hash(rules))}"
    directory.mkdir(exist_ok=True)
    for index, text in enumerate(rules):
        (directory / f"{index}.yaml").write_text(text)
    book = load_rule_book([directory], make_engine("cpp"))
    placements = PodIndex(recent_seconds=600.0)
    source = FileNodeSource(files / "nodes.json")
    contexts = NodeContexts(source, FileMetricsSource(files / "metrics.json"), placements)
    warm_up = Call(pods[0], contexts.for_names(names)[0], Verb.FILTER)
    evaluate(prepared(book), warm_up)  # every node's context built
    samples: list[float] = []
    placed: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + MAX_SECONDS / 6
    for pod in pods:
        if time.monotonic() > deadline:
            break
        started = time.perf_counter()
        candidates = contexts.for_names(names)[0]
        filtered = evaluate(prepared(book), Call(pod, candidates, Verb.FILTER))
        passing = [c for c in candidates if filtered.nodes[c.name].passed]
        scored = evaluate(prepared(book), Call(pod, passing, Verb.PRIORITIZE))
        samples.append((time.perf_counter() - started) * 1000)
        best = max(scored.nodes.values(), key=lambda v: v.score or 0).name if scored.nodes else ""
        placed[best] += 1
        if burst and best:
            placements.reserve(pod, best)
            bound = json.loads(json.dumps(pod))
            bound["spec"]["nodeName"] = best
            bound["status"] = {"phase": "Pending"}
            placements.apply("ADDED", bound)  # the pod watch shows it bound
    return {
        "replicas": len(samples),
        "p50_ms": round(statistics.median(samples), 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
        "nodes_used": len(placed),
        "most_on_one_node": max(placed.values()),
    }


def run(nodes: int, replicas: int) -> list[dict[str, Any]]:
    """Every rule set of RULE_SETS, steady and with pod events, over `nodes` nodes and `replicas` replicas
    (at most 5000 and 500)."""
    nodes, replicas = min(nodes, 5000), min(replicas, 500)
    workload = make_workload(nodes)
    now = datetime.datetime.now(datetime.UTC)
    pods = []
    for replica in range(replicas):
        pod = workload.pod(0, replica)
        pod["metadata"]["uid"] = f"burst-{replica}"
        pod["metadata"]["creationTimestamp"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        pods.append(pod)
    names = [n["metadata"]["name"] for n in workload.nodes]
    results = []
    with tempfile.TemporaryDirectory() as temporary:
        files = Path(temporary)
        (files / "nodes.json").write_text(json.dumps({"items": workload.nodes}))
        (files / "metrics.json").write_text(json.dumps(workload.metrics))
        for name, rules in RULE_SETS.items():
            for burst in (False, True):
                found = one_run(rules, files, names, pods, burst=burst)
                found |= {"rules": name, "pod_events": burst, "nodes": nodes}
                results.append(found)
                print(json.dumps(found), file=sys.stderr, flush=True)
    return results


def table(results: Sequence[dict[str, Any]]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| rules | pod events between requests | p50 ms | p99 ms | nodes used | most on one node |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in results:
        events = "yes" if r["pod_events"] else "no (steady)"
        lines.append(
            f"| {r['rules']} | {events} | {r['p50_ms']} | {r['p99_ms']} | {r['nodes_used']} | {r['most_on_one_node']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = run(args.nodes, args.replicas)
    print(table(results))
    if args.json:
        nodes, replicas = min(args.nodes, 5000), min(args.replicas, 500)
        args.json.write_text(json.dumps({"nodes": nodes, "replicas": replicas, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
