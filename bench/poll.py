"""The first request after a metrics poll: what a new metrics-server sample costs, against the steady p50.

Usage: `python bench/poll.py [--size 1000] [--polls 8] [--interval 2] [--rules founding] [--json FILE]`

A real `rulesched serve` process polls a loopback metrics-server (this script, on 127.0.0.1: the one
endpoint `GET /apis/metrics.k8s.io/v1beta1/nodes`, reached through a kubeconfig) every `--interval`
seconds; its nodes come from the benchmark's `--nodes` file, pods and namespaces from empty files. Every
poll answers new samples for every node (new CPU and memory usage, stamped now), as metrics-server does
after each scrape, so every candidate's context and every rule that reads `metrics` is stale after it.
After each poll has been served (and parsed: `--settle` seconds), one pod is sent as filter then
prioritize (names mode, all `--size` nodes, the same keep-alive connection as the steady requests), then
steady replicas until just before the next poll. Reports the p50 of the first cycles after a poll, the
p50 of steady cycles, and their ratio (the issue's target: at most 3). Bounded: `--polls` polls.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.server
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.harness import Client, free_port, one_pod, stop, wait_ready, write_inputs  # noqa: E402
from bench.harness import Server as BenchServer  # noqa: E402
from bench.workload import make_workload  # noqa: E402

JSON = dict[str, Any]
METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/nodes"


class MetricsServer(http.server.ThreadingHTTPServer):
    """A loopback metrics-server: each list is a new poll's samples for `names`, counted in `polls`."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.names = list(names)
        self.polls = 0
        self.served = threading.Event()
        self.rng = random.Random(7)

    def samples(self) -> bytes:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        items = [
            {
                "metadata": {"name": name},
                "timestamp": stamp,
                "window": "15s",
                "usage": {
                    "cpu": f"{self.rng.randint(50_000_000, 15_000_000_000)}n",
                    "memory": f"{self.rng.randint(1, 60_000_000)}Ki",
                },
            }
            for name in self.names
        ]
        document = {"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}
        return orjson.dumps(document)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: MetricsServer

    def do_GET(self) -> None:
        if self.path.split("?")[0] != METRICS_PATH:
            self.send_error(404)
            return
        body = self.server.samples()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.polls += 1
        self.server.served.set()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def kubeconfig(path: Path, port: int) -> None:
    """A kubeconfig for the loopback server: plain HTTP, no credentials."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "loopback", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "bench", "user": {}}],
        "contexts": [{"name": "bench", "context": {"cluster": "loopback", "user": "bench"}}],
        "current-context": "bench",
    }
    path.write_bytes(orjson.dumps(config))


@contextlib.contextmanager
def rulesched(files: Path, rules: str, interval: float) -> Iterator[int]:
    """`rulesched serve` polling the loopback metrics-server; its port."""
    port = free_port()
    for name, kind in (("pods.json", "PodList"), ("namespaces.json", "NamespaceList")):
        (files / name).write_bytes(orjson.dumps({"apiVersion": "v1", "kind": kind, "items": []}))
    command = [
        sys.executable, "-m", "rulesched", "serve", "--rules", str(files / f"rules-{rules}"),
        "--nodes", str(files / "nodes.json"), "--pods-file", str(files / "pods.json"),
        "--namespaces-file", str(files / "namespaces.json"), "--cluster", "on",
        "--kubeconfig", str(files / "kubeconfig"), "--metrics-interval", str(interval), "--port", str(port),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(process, port)
        yield port
    finally:
        stop(process)


def refreshed_nodes(port: int) -> float:
    """rulesched's count of nodes made ready ahead of requests (`--refresh-ahead`), from its /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(r"^rulesched_refreshed_nodes_total (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def measure(args: argparse.Namespace) -> JSON:
    workload = make_workload(args.size)
    names = [n["metadata"]["name"] for n in workload.nodes]
    server = BenchServer(f"rulesched-cpp/{args.rules}", "rulesched", args.rules, "cpp", (args.size,))
    pods = iter(workload.pods(100_000, replicas=True))
    first: list[float] = []
    steady: list[float] = []
    mismatches = 0
    refreshed = 0.0
    metrics = MetricsServer(names)
    threading.Thread(target=metrics.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory(prefix="rulesched-poll-") as directory:
            files = Path(directory)
            write_inputs(workload, files)
            kubeconfig(files / "kubeconfig", metrics.server_address[1])
            with rulesched(files, args.rules, args.interval) as port:
                client = Client(port)
                for poll in range(args.polls + 1):  # the first poll seen may be the start-up's: not counted
                    metrics.served.clear()
                    if not metrics.served.wait(args.interval * 3):
                        raise RuntimeError("rulesched did not poll the loopback metrics-server")
                    time.sleep(args.settle)  # the samples parsed and swapped in
                    polled_at = metrics.polls
                    cycles: list[float] = []
                    deadline = time.monotonic() + args.interval - args.settle - 0.3
                    while time.monotonic() < deadline and metrics.polls == polled_at and len(cycles) < 200:
                        filtered, prioritized, _, matches = one_pod(client, next(pods), workload.nodes, "names", server)
                        cycles.append(filtered + prioritized)
                        mismatches += not matches
                    if poll and metrics.polls == polled_at and cycles:
                        first.append(cycles[0])
                        steady.extend(cycles[2:])
                refreshed = refreshed_nodes(port)
                client.close()
    finally:
        metrics.shutdown()
    p50_first = statistics.median(first) if first else None
    p50_steady = statistics.median(steady) if steady else None
    ratio = round(p50_first / p50_steady, 2) if p50_first and p50_steady else None
    return {
        "size": args.size,
        "rules": args.rules,
        "polls": len(first),
        "first_after_poll_ms": [round(x, 3) for x in first],
        "first_after_poll_p50_ms": round(p50_first, 3) if p50_first else None,
        "steady_p50_ms": round(p50_steady, 3) if p50_steady else None,
        "steady_count": len(steady),
        "ratio": ratio,
        "mismatches": mismatches,
        "refreshed_ahead": refreshed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The first request after a metrics poll, against the steady p50.")
    parser.add_argument("--size", type=int, default=1000, help="nodes, all of them candidates")
    parser.add_argument("--polls", type=int, default=8, help="measured polls")
    parser.add_argument("--interval", type=float, default=2.0, help="rulesched's --metrics-interval, seconds")
    parser.add_argument("--settle", type=float, default=0.3, help="seconds between a poll and the first request")
    parser.add_argument("--rules", choices=("founding", "pod-dependent"), default="founding")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    result = measure(args)
    print("| nodes | rules | settle s | polls | first after a poll p50 ms | steady p50 ms | ratio | refreshed ahead |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {result['size']} | {result['rules']} | {args.settle} | {result['polls']} | "
        f"{result['first_after_poll_p50_ms']} | {result['steady_p50_ms']} | {result['ratio']} | "
        f"{result['refreshed_ahead']:g} |"
    )
    if args.json:
        args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 1 if result["mismatches"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
