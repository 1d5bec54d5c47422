"""The shadow scenario: does a shadow book compare every call of a burst, and what does it cost the live answers?

Usage: `python bench/shadow.py [--sizes 500,1000] [--pacings back-to-back,paced] [--pods 1000] [--rounds 2]
[--rate 65] [--control] [--json FILE]`
(`bench/run.py --only shadow-burst` runs it too, small, after its HTTP scenarios.)

Two rulesched servers with the same live rules (the founding example, names mode): `live-only` without a
shadow book, `shadowed` with the pod-dependent rule set as its shadow rules. Each round sends both the same
calls, over one keep-alive connection each, as kube-scheduler does: for every pod a filter, then a
prioritize with the nodes that passed. A round is a burst of distinct pods, then the rules reloaded in the
middle (live and shadow: the shadow's score turned around, a new book on both sides, whose caches start
empty), then replicas of one workload. Two pacings: `back-to-back` (the next call sent as soon as the
answer is read) and `paced` (`--rate` pods a second, the rate of a real kube-scheduler's 500-pod burst).
Back to back, the servers take turns by round (the first alternates), each getting a whole burst in a
row, so that the shadow server's queue sees the burst as kube-scheduler would send it, and the next burst
waits until its comparisons are made (bounded wait), so that no burst shares the machine with the comparisons
of the one before; paced, they take turns within each pod's slot, so that a noisy machine slows them alike.
Repeat rounds on a noisy machine. `--pacings` runs one pacing alone. A round of the default 1000 pods is 500
distinct ones (a real kube-scheduler's 500-pod burst), the reload, 500 replicas: 2000 calls of each verb a
server, whose p99 (the 20th slowest) lies past the first calls after each reload, made while the new books'
caches fill (11-35 ms in a traced run). With 300 pods a round the p99 was the 6th slowest of 600, among those
first calls: the control's p99 ratios ranged 0.36-1.91 over eight runs, with 1000 pods 0.81-1.07 over five.

With `--control`, a third server, `control`, the same as `live-only`, is sent the same calls: its ratios to
`live-only` are what the machine's noise alone makes of two identical servers in that run, the yardstick for
the shadowed server's.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Client, Server, counted, percentiles, reported, request_body, sizes_of, started, write_inputs
from bench.workload import Workload, make_workload

JSON = dict[str, Any]
PACINGS = ("back-to-back", "paced")
QUICK_RELOAD = ("--reload-debounce", "0.05")
"""The rules reloaded as soon as the directory watch says so: the burst waits for the reload."""
SERVERS = (
    Server("live-only", "rulesched", "founding", "cpp", (), options=QUICK_RELOAD),
    Server("shadowed", "rulesched", "founding", "cpp", (), shadow="pod-dependent", options=QUICK_RELOAD),
)
CONTROL = Server("control", "rulesched", "founding", "cpp", (), options=QUICK_RELOAD)
"""With `--control`: `live-only` again, whose ratios to it are the run's own noise."""
RATE = 65.0
"""Pods a second when paced: a real kube-scheduler's 500-pod burst, limited by its API server."""
MAX_SECONDS = 300.0
"""The whole run stops sending after this long, whatever is left."""
DRAIN_SECONDS = 30.0
"""How long to wait for the shadow queue to empty before its counts are read."""
RELOAD_SECONDS = 10.0
"""How long to wait for a reload of the rules to be seen."""


@dataclass
class Target:
    """One server started for a size and pacing: its port, its files, and what it was measured doing."""

    server: Server
    port: int
    files: Path
    filter_ms: list[float] = field(default_factory=list)
    prioritize_ms: list[float] = field(default_factory=list)
    reloads: int = 0
    """Reloads of the rules seen loaded (live and, with one, shadow) within `RELOAD_SECONDS`."""

    def get(self, path: str) -> Any:
        client = Client(self.port)
        try:
            client.connection.request("GET", path)
            return orjson.loads(client.connection.getresponse().read())
        finally:
            client.close()

    def generations(self) -> tuple[int, ...]:
        """The live rules' generation, and the shadow rules' when there are any."""
        live = self.get("/rules")["active"]["generation"]
        return (live, self.get("/shadow")["book"]["generation"]) if self.server.shadow else (live,)

    def reload(self, round_number: int) -> None:
        """Change the live rules (a comment: a new book all the same) and turn the shadow's score around (or
        back), then wait for the server to load both (bounded)."""
        before = self.generations()
        live = self.files / "rules-founding" / "0.yaml"
        live.write_text(live.read_text() + f"# reloaded in round {round_number}\n")
        shadow = self.files / "rules-pod-dependent" / "0.yaml"
        text = shadow.read_text()
        turned = text.replace("-variables.cpuUsed", "variables.cpuUsed")
        shadow.write_text(turned if turned != text else text.replace("variables.cpuUsed", "-variables.cpuUsed"))
        deadline = time.monotonic() + RELOAD_SECONDS
        while time.monotonic() < deadline:
            if all(now > then for now, then in zip(self.generations(), before, strict=True)):
                self.reloads += 1
                return
            time.sleep(0.02)

    def send(self, client: Client, pod: JSON, nodes: Sequence[JSON]) -> None:
        """One pod's filter and prioritize, their latencies kept."""
        filter_ms, prioritize_ms = one_pod(client, pod, nodes)
        self.filter_ms.append(filter_ms)
        self.prioritize_ms.append(prioritize_ms)

    def drained(self) -> JSON | None:
        """Once nothing waits for its comparison (bounded wait): the shadow's status then, or None without a
        shadow book."""
        if not self.server.shadow:
            return None
        deadline = time.monotonic() + DRAIN_SECONDS
        while True:
            status: JSON = self.get("/shadow")
            if status["queue"]["waiting"] == 0 or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def shadow_counts(self) -> JSON:
        """Compared and dropped calls (from the metrics counters, which a reload does not reset) and where
        they were made, once nothing waits for its comparison (bounded wait)."""
        status = self.drained()
        assert status is not None  # a shadowed server's
        client = Client(self.port)
        client.connection.request("GET", "/metrics")
        exposition = client.connection.getresponse().read().decode()
        client.close()
        by_outcome = counted(exposition, "rulesched_shadow_comparisons_total", "outcome")
        counts = {outcome: by_outcome.get((outcome,), 0) for outcome in ("same", "differs", "dropped")}
        compared = counts["same"] + counts["differs"]
        return {"compared": compared, "dropped": counts["dropped"], "calls": compared + counts["dropped"],
                "made": status["made"]}  # fmt: skip

    def result(self, size: int, pacing: str) -> JSON:
        found: JSON = {"server": self.server.name, "size": size, "pacing": pacing, "pods": len(self.filter_ms),
                       "filter": percentiles(self.filter_ms), "prioritize": percentiles(self.prioritize_ms),
                       "reloads": self.reloads}  # fmt: skip
        if self.server.shadow:
            found["shadow"] = self.shadow_counts()
        return found


def calls(workload: Workload, round_number: int, pods: int) -> Iterator[JSON | None]:
    """A round's pods: distinct ones, then None (reload the rules here), then replicas of one workload."""
    first = 1 + round_number * pods
    yield from (workload.pod(first + i) for i in range(pods // 2))
    yield None
    yield from (workload.pod(first + pods, replica) for replica in range(pods - pods // 2))


def one_pod(client: Client, pod: JSON, nodes: Sequence[JSON]) -> tuple[float, float]:
    """Filter, then prioritize with the nodes that passed; their latencies."""
    filter_ms, answer = client.post("/filter", request_body(pod, nodes, "names"))
    passed = set(orjson.loads(answer).get("NodeNames") or [])
    survivors = [n for n in nodes if n["metadata"]["name"] in passed]
    prioritize_ms, _ = client.post("/prioritize", request_body(pod, survivors, "names"))
    return filter_ms, prioritize_ms


def back_to_back(target: Target, pods: Iterator[JSON | None], nodes: Sequence[JSON], stop_at: float) -> None:
    """A round's pods to one server, each call sent as soon as the answer before it is read."""
    client = Client(target.port)
    for number, pod in enumerate(pods):
        if time.monotonic() > stop_at:
            break
        if pod is None:
            target.reload(number)
        else:
            target.send(client, pod, nodes)
    client.close()


def paced(targets: Sequence[Target], pods: Iterator[JSON | None], nodes: Sequence[JSON], rate: float,
          stop_at: float) -> None:  # fmt: skip
    """A round's pods at `rate` pods a second to each server, the servers taking turns within each pod's
    slot (the first alternating), so that a noisy machine slows them alike."""
    clients = [Client(target.port) for target in targets]
    next_at = time.monotonic()
    for number, pod in enumerate(pods):
        if time.monotonic() > stop_at:
            break
        if pod is None:
            for target in targets:
                target.reload(number)
            continue
        time.sleep(max(0.0, next_at - time.monotonic()))
        next_at += 1 / rate
        turn = [*zip(targets, clients, strict=True)][:: 1 if number % 2 else -1]
        for target, client in turn:
            target.send(client, pod, nodes)
    for client in clients:
        client.close()


def run(sizes: Sequence[int], pods: int, rounds: int, rate: float, *, control: bool = False,
        pacings: Sequence[str] = PACINGS) -> list[JSON]:  # fmt: skip
    """Every size and pacing, `rounds` rounds of `pods` pods each; one result per (size, pacing, server), and
    for `CONTROL` too with `control`."""
    results: list[JSON] = []
    stop_at = time.monotonic() + MAX_SECONDS
    workload = make_workload(max(sizes))
    for size, pacing in itertools.product(sizes, pacings):
        with (
            tempfile.TemporaryDirectory(prefix="rulesched-shadow-bench-") as directory,
            contextlib.ExitStack() as stack,
        ):
            targets = []
            for server in (*SERVERS, CONTROL) if control else SERVERS:
                files = Path(directory) / server.name
                files.mkdir()
                write_inputs(workload, files)
                targets.append(Target(server, stack.enter_context(started(server, files))[1], files))
            for number in range(rounds):
                order = targets if number % 2 == 0 else targets[::-1]
                if pacing == "paced":
                    paced(order, calls(workload, number, pods), workload.nodes[:size], rate, stop_at)
                    continue
                for target in order:
                    back_to_back(target, calls(workload, number, pods), workload.nodes[:size], stop_at)
                    target.drained()  # the next burst, to this server or another, on a quiet machine
            for target in targets:
                results.append(target.result(size, pacing))
                print(orjson.dumps(results[-1]).decode(), file=sys.stderr, flush=True)
    return results


def table(results: Sequence[JSON]) -> str:
    """The results as a Markdown table, the shadow server's latencies also as ratios to the live-only one's."""
    base = {(r["size"], r["pacing"]): r for r in results if r["server"] == "live-only"}
    lines = [
        "| nodes | pacing | server | pods | filter p50 / p99 ms | prioritize p50 / p99 ms "
        "| x live-only: filter p50, p99; prioritize p50, p99 | reloads | compared | dropped "
        "| made between calls / in thread |",
        "|---:|---|---|---:|---|---|---|---:|---:|---:|---|",
    ]
    for r in results:
        other = base.get((r["size"], r["pacing"]), r)
        ratios = ", ".join(str(_ratio(r, other, verb, q)) for verb in ("filter", "prioritize") for q in ("p50", "p99"))
        lines.append(
            f"| {r['size']} | {r['pacing']} | {r['server']} | {r['pods']} | {_latency(r['filter'])} "
            f"| {_latency(r['prioritize'])} | {ratios} | {r['reloads']} | {_counts(r.get('shadow'))} |"
        )
    return "\n".join(lines)


def _latency(found: JSON) -> str:
    return f"{found['p50']} / {found['p99']}"


def _counts(shadow: JSON | None) -> str:
    if shadow is None:
        return " | | "
    made = shadow["made"]
    counts = f"{shadow['compared']} of {shadow['calls']} | {shadow['dropped']}"
    return f"{counts} | {made['betweenCalls']} / {made['thread']}"


def _ratio(result: JSON, base: JSON, verb: str, q: str) -> float | None:
    ours, theirs = result[verb][q], base[verb][q]
    return round(ours / theirs, 2) if ours is not None and theirs else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,1000", help="comma-separated candidate counts")
    parser.add_argument("--pods", type=int, default=1000, help="pods per round (at most 2000)")
    parser.add_argument("--pacings", default=",".join(PACINGS), help="comma-separated, of: " + ", ".join(PACINGS))
    parser.add_argument("--rounds", type=int, default=2, help="rounds per server (at most 10)")
    parser.add_argument("--rate", type=float, default=RATE, help="pods a second when paced")
    parser.add_argument("--control", action="store_true", help="also a second live-only server: the run's noise")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = sizes_of(args.sizes)
    pacings = [pacing for pacing in args.pacings.split(",") if pacing]
    if not pacings or set(pacings) - set(PACINGS):
        parser.error(f"--pacings: {args.pacings!r} is not a comma-separated list of {', '.join(PACINGS)}")
    results = run(sizes, min(args.pods, 2000), min(args.rounds, 10), args.rate, control=args.control, pacings=pacings)
    return reported(table(results), results, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
