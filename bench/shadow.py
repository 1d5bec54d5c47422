"""The shadow scenario: does a shadow book compare every call of a burst, and what does it cost the live answers?

Usage: `python bench/shadow.py [--sizes 500,1000] [--pods 300] [--rounds 2] [--rate 65] [--json FILE]`
(`bench/run.py --only shadow-burst` runs it too, small, after its HTTP scenarios.)

Two rulesched servers with the same live rules (the founding example, names mode): `live-only` without a
shadow book, `shadowed` with the pod-dependent rule set as its shadow rules. Each round sends both the same
calls, over one keep-alive connection each, as kube-scheduler does: for every pod a filter, then a
prioritize with the nodes that passed. A round is a burst of distinct pods, then the rules reloaded in the
middle (live and shadow: the shadow's score turned around, a new book on both sides, whose caches start
empty), then replicas of one workload. Two pacings: `back-to-back` (the next call sent as soon as the
answer is read) and `paced` (`--rate` pods a second, the rate of a real kube-scheduler's 500-pod burst).
The servers take turns (the first alternates by round), each getting a whole burst in a row, so that the
shadow server's queue sees the burst as kube-scheduler would send it; repeat rounds on a noisy machine.

For each server and pacing: the live answers' p50 and p99 (ms); for `shadowed`, how many calls were
compared and dropped (its `rulesched_shadow_comparisons_total`, read once the queue has drained, bounded
wait) and where they were made (`/shadow`'s `made`). Bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.run import Client, Server, percentiles, request_body, started, write_inputs
from bench.workload import Workload, make_workload

JSON = dict[str, Any]
PACINGS = ("back-to-back", "paced")
SERVERS = (
    Server("live-only", "rulesched", "founding", "cpp", ()),
    Server("shadowed", "rulesched", "founding", "cpp", (), shadow="pod-dependent"),
)
MAX_SECONDS = 300.0
"""The whole run stops sending after this long, whatever is left."""
DRAIN_SECONDS = 30.0
"""How long to wait for the shadow queue to empty before its counts are read."""


def reload_rules(files: Path) -> None:
    """Change the live rules (a comment: a new book all the same) and turn the shadow's score around."""
    live = files / "rules-founding" / "0.yaml"
    live.write_text(live.read_text() + "# reloaded\n")
    shadow = files / "rules-pod-dependent" / "0.yaml"
    shadow.write_text(shadow.read_text().replace("expression: -variables.cpuUsed", "expression: variables.cpuUsed"))


def calls(workload: Workload, round_number: int, pods: int) -> Iterator[JSON | None]:
    """A round's pods: distinct ones, then None (reload the rules here), then replicas of one workload."""
    first = 1 + round_number * pods
    yield from (workload.pod(first + i) for i in range(pods // 2))
    yield None
    yield from (workload.pod(first + pods, replica) for replica in range(pods - pods // 2))


def one_pod(client: Client, pod: JSON, nodes: Sequence[JSON]) -> tuple[float, float]:
    filter_ms, answer = client.post("/filter", request_body(pod, nodes, "names"))
    passed = set(orjson.loads(answer).get("NodeNames") or [])
    prioritize_ms, _ = client.post(
        "/prioritize", request_body(pod, [n for n in nodes if n["metadata"]["name"] in passed], "names")
    )
    return filter_ms, prioritize_ms


def burst(client: Client, files: Path, pods: Iterator[JSON | None], nodes: Sequence[JSON], rate: float | None,
          stop_at: float) -> tuple[list[float], list[float]]:  # fmt: skip
    """Send the round's pods; the filter and prioritize latencies."""
    filters: list[float] = []
    prioritizes: list[float] = []
    interval = 1 / rate if rate else 0.0
    next_at = time.monotonic()
    for pod in pods:
        if time.monotonic() > stop_at:
            break
        if pod is None:
            reload_rules(files)
            continue
        if interval:
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
        filter_ms, prioritize_ms = one_pod(client, pod, nodes)
        filters.append(filter_ms)
        prioritizes.append(prioritize_ms)
    return filters, prioritizes


def get(port: int, path: str) -> bytes:
    client = Client(port)
    try:
        client.connection.request("GET", path)
        return client.connection.getresponse().read()
    finally:
        client.close()


def shadow_counts(port: int) -> JSON:
    """Compared and dropped calls (from the metrics counters, which a reload does not reset) and where they
    were made, once the queue has drained (bounded wait)."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while True:
        status = orjson.loads(get(port, "/shadow"))
        if status["queue"]["waiting"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    counts = {"same": 0, "differs": 0, "dropped": 0}
    for line in get(port, "/metrics").decode().splitlines():
        if line.startswith("rulesched_shadow_comparisons_total{"):
            outcome = line.split('outcome="')[1].split('"')[0]
            counts[outcome] += int(float(line.rsplit(" ", 1)[1]))
    compared = counts["same"] + counts["differs"]
    return {"compared": compared, "dropped": counts["dropped"], "calls": compared + counts["dropped"],
            "made": status["made"]}  # fmt: skip


def run(sizes: Sequence[int], pods: int, rounds: int, rate: float) -> list[JSON]:
    """Every size and pacing, `rounds` rounds of `pods` pods each; one result per (size, pacing, server)."""
    results: list[JSON] = []
    stop_at = time.monotonic() + MAX_SECONDS
    workload = make_workload(max(sizes))
    for size, pacing in itertools.product(sizes, PACINGS):
        with (
            tempfile.TemporaryDirectory(prefix="rulesched-shadow-bench-") as directory,
            contextlib.ExitStack() as stack,
        ):
            ports: dict[str, int] = {}
            homes: dict[str, Path] = {}
            for server in SERVERS:
                homes[server.name] = Path(directory) / server.name
                homes[server.name].mkdir()
                write_inputs(workload, homes[server.name])
                ports[server.name] = stack.enter_context(started(server, homes[server.name]))[1]
            samples: dict[str, tuple[list[float], list[float]]] = {s.name: ([], []) for s in SERVERS}
            for number in range(rounds):
                order = SERVERS if number % 2 == 0 else SERVERS[::-1]
                for server in order:
                    client = Client(ports[server.name])
                    found = burst(client, homes[server.name], calls(workload, number, pods), workload.nodes[:size],
                                  rate if pacing == "paced" else None, stop_at)  # fmt: skip
                    client.close()
                    samples[server.name][0].extend(found[0])
                    samples[server.name][1].extend(found[1])
            for server in SERVERS:
                filters, prioritizes = samples[server.name]
                result: JSON = {"server": server.name, "size": size, "pacing": pacing, "pods": len(filters),
                                "filter": percentiles(filters), "prioritize": percentiles(prioritizes)}  # fmt: skip
                if server.shadow:
                    result["shadow"] = shadow_counts(ports[server.name])
                results.append(result)
                print(orjson.dumps(result).decode(), file=sys.stderr, flush=True)
    return results


def table(results: Sequence[JSON]) -> str:
    """The results as a Markdown table, the shadow server's latencies also as ratios to the live-only one's."""
    base = {(r["size"], r["pacing"]): r for r in results if "shadow" not in r}
    lines = [
        "| nodes | pacing | server | pods | filter p50 / p99 ms | prioritize p50 / p99 ms "
        "| x live-only: filter p50, p99; prioritize p50, p99 | compared | dropped | made after answer / in thread |",
        "|---:|---|---|---:|---|---|---|---:|---:|---|",
    ]
    for r in results:
        other = base.get((r["size"], r["pacing"]), r)
        ratios = ", ".join(str(_ratio(r, other, verb, q)) for verb in ("filter", "prioritize") for q in ("p50", "p99"))
        lines.append(
            f"| {r['size']} | {r['pacing']} | {r['server']} | {r['pods']} | {_latency(r['filter'])} "
            f"| {_latency(r['prioritize'])} | {ratios} | {_counts(r.get('shadow'))} |"
        )
    return "\n".join(lines)


def _latency(found: JSON) -> str:
    return f"{found['p50']} / {found['p99']}"


def _counts(shadow: JSON | None) -> str:
    if shadow is None:
        return " | | "
    made = shadow["made"]
    return f"{shadow['compared']} of {shadow['calls']} | {shadow['dropped']} | {made['afterAnswer']} / {made['thread']}"


def _ratio(result: JSON, base: JSON, verb: str, q: str) -> float | None:
    ours, theirs = result[verb][q], base[verb][q]
    return round(ours / theirs, 2) if ours is not None and theirs else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,1000", help="comma-separated candidate counts")
    parser.add_argument("--pods", type=int, default=300, help="pods per round (at most 2000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per server (at most 10)")
    parser.add_argument("--rate", type=float, default=65.0, help="pods a second when paced")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = [min(int(n), 5000) for n in args.sizes.split(",") if n.strip()]
    results = run(sizes, min(args.pods, 2000), min(args.rounds, 10), args.rate)
    print(table(results))
    if args.json:
        args.json.write_bytes(orjson.dumps({"results": results}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
