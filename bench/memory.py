"""Memory scenario (issue #12): RSS of a rulesched server while it meets ever new workloads.

A real `rulesched serve` process (cluster off, nodes and metrics from files) with the shipped rules plus
a pod-dependent zone filter, nodes spread over many zones; each request is a pod of a Deployment never
seen before (a new pod key), sent as /filter then /prioritize. RSS is sampled every `--every` pods.
Bounded: `--pods` requests at most, `--seconds` at most.

    .venv/bin/python bench/memory.py --nodes 1000 --zones 40 --pods 100000 --mode names

Not part of the test suite (it takes minutes at full size); tests/decide/test_memory.py proves the bound small.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.harness import Client, free_port, memory_mb, stop, wait_ready  # noqa: E402
from bench.workload import POD_RULES, ZONE_LABEL, make_workload  # noqa: E402

JSON = dict[str, Any]


def zoned_workload(nodes: int, zones: int) -> tuple[list[JSON], JSON]:
    """`nodes` bench nodes relabelled over `zones` zones, and their metrics."""
    workload = make_workload(nodes)
    for index, node in enumerate(workload.nodes):
        node["metadata"]["labels"][ZONE_LABEL] = f"zone-{index % zones}"
    return workload.nodes, workload.metrics


def new_pod(number: int, zones: int) -> JSON:
    """A pod of Deployment `number`: a pod key never seen before, in zone `number % zones`."""
    workload = make_workload(0)
    pod = workload.pod(1 + number)
    pod["metadata"]["labels"][ZONE_LABEL] = f"zone-{number % zones}"
    pod["metadata"]["labels"]["rulesched.io/zone"] = f"zone-{number % zones}"
    return pod


def write_files(files: Path, nodes: list[JSON], metrics: JSON) -> None:
    (files / "nodes.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "NodeList", "items": nodes}))
    (files / "metrics.json").write_bytes(orjson.dumps(metrics))
    rules = files / "rules"
    rules.mkdir()
    for shipped in sorted((ROOT / "rules").glob("*.yaml")):
        shutil.copy(shipped, rules / shipped.name)
    (rules / "zz-pod-zone.yaml").write_text(POD_RULES, encoding="utf-8")


def body(pod: JSON, nodes: Sequence[JSON], mode: str) -> bytes:
    if mode == "names":
        return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]})
    return orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None})


def measure(args: argparse.Namespace, files: Path) -> list[JSON]:
    nodes, metrics = zoned_workload(args.nodes, args.zones)
    write_files(files, nodes, metrics)
    port = free_port()
    argv = [
        sys.executable, "-m", "rulesched", "serve", "--rules", str(files / "rules"), "--cluster", "off",
        "--metrics", str(files / "metrics.json"), "--cel-engine", args.engine, "--port", str(port),
        *(["--nodes", str(files / "nodes.json")] if args.mode == "names" else []), *args.extra,
    ]  # fmt: skip
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples: list[JSON] = []
    try:
        wait_ready(process, port)
        client = Client(port)
        deadline = time.monotonic() + args.seconds
        latencies: list[float] = []
        for number in range(args.pods):
            pod = new_pod(number, args.zones)
            request = body(pod, nodes, args.mode)
            filter_ms, _ = client.post("/filter", request)
            prioritize_ms, _ = client.post("/prioritize", request)
            latencies.append(filter_ms + prioritize_ms)
            if (number + 1) % args.every == 0 or number + 1 == args.pods or time.monotonic() > deadline:
                latencies.sort()
                p50 = round(latencies[len(latencies) // 2], 2)
                sample = {"pods": number + 1, **memory_mb(process.pid), "p50_ms": p50}
                samples.append(sample)
                print(orjson.dumps(sample).decode(), flush=True)
                latencies = []
            if time.monotonic() > deadline:
                break
        client.close()
    finally:
        stop(process)
    return samples


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--zones", type=int, default=40)
    parser.add_argument("--pods", type=int, default=100_000, help="at most this many new pods")
    parser.add_argument("--seconds", type=float, default=3600.0, help="at most this long")
    parser.add_argument("--every", type=int, default=5000, help="sample RSS every this many pods")
    parser.add_argument("--mode", choices=("names", "full"), default="names")
    parser.add_argument("--engine", choices=("cpp", "celpy"), default="cpp")
    parser.add_argument("extra", nargs="*", help="more `rulesched serve` options (after --)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rulesched-memory-") as folder:
        samples = measure(args, Path(folder))
    if samples:
        first, last = samples[0], samples[-1]
        print(f"RSS {first['rss_mb']} MB after {first['pods']} pods -> {last['rss_mb']} MB after {last['pods']} pods")
    return 0


if __name__ == "__main__":
    sys.exit(main())
