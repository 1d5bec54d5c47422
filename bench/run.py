"""The rulesched benchmark: the real server, driven over loopback the way kube-scheduler drives it.

Usage: `python bench/run.py [--quick] [--json FILE]` (`GO=/path/to/go` to include the Go extender)

For every server (rulesched on each CEL engine and rule set; the hand-written extenders of the same
rules, for both rule sets: `baseline_server.py`, the lean Python one, `lean_server.py`, and the Go one,
`go_extender/`, built when a Go toolchain is found; rulesched-cpp again with the other rule set as its
shadow rules, `rulesched-cpp-shadow`; and a constant-answer HTTP floor), one subprocess
is started on 127.0.0.1 and driven over ONE keep-alive connection: for each pod a filter call, then a
prioritize call with the nodes that passed. The servers of one rule set run side by side and each pod
goes to each of them in turn, so that a noisy machine slows them alike and the ratios hold. Inputs are
seeded (`bench/workload.py`); every scenario is bounded in time and in count. Each scenario's p50 is
also given as a ratio to the best (fastest) hand-written extender of the same rules in the same run,
and to the Go one. The table goes to stdout, the same numbers as JSON to `bench/results/latest.json`
(or `--json FILE`). Latency is the time from sending a request to having read the whole answer; it
includes no client encode or decode. `--quick` is the CI smoke mode (one small size, few iterations,
under a minute).

The other scenarios have a script each: `poll.py` (the first request after a metrics poll), `rss.py`
(memory per cached node), `burst.py` (replicas whose placements feed `recent` and `pods`),
`http_floor.py` (uvicorn's options), `stages.py` (where a request's time goes), `memory.py` (RSS over
100,000 new workloads), `shadow.py` (a burst with a shadow book: compared, dropped, the live latency beside
a server without one; also run here after the burst scenario, `--only shadow-burst`), `real_scheduler.py` (a
real kube-scheduler and kube-apiserver, the caller's binaries, with and without shadow rules).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench import burst, shadow  # noqa: E402
from bench.harness import JSON, Client, Server, memory_mb, one_pod, percentiles, started, write_inputs  # noqa: E402
from bench.workload import RULE_SETS, Workload, make_workload  # noqa: E402

SIZES = (100, 500, 1000, 5000)
CELPY_SIZES = (100, 500, 1000)
"""celpy converts a node in about 1 ms and evaluates a rule in 0.1 to 1 ms: 5000 nodes take many seconds to warm."""


@dataclass(frozen=True)
class Budget:
    """How long and how often each scenario runs."""

    seconds: float
    max_pods: int
    min_pods: int
    warmup: int


BURST_FULL, BURST_QUICK = (1000, 60), (100, 12)
"""The burst scenario's nodes and replicas (bench/burst.py), run after the HTTP scenarios."""
SHADOW_FULL, SHADOW_QUICK = ((500, 1000), 300, 2), ((100,), 12, 1)
"""The shadow burst scenario's sizes, pods a round and rounds (bench/shadow.py), run after the burst one."""
FULL_BUDGET = Budget(seconds=4.0, max_pods=300, min_pods=5, warmup=3)
QUICK_BUDGET = Budget(seconds=0.6, max_pods=25, min_pods=3, warmup=2)


@dataclass
class Scenario:
    """The measured latencies of one (server, mode, size, pods) combination, in milliseconds."""

    server: str
    mode: str
    size: int
    pods: str
    filter_ms: list[float] = field(default_factory=list)
    prioritize_ms: list[float] = field(default_factory=list)
    total_ms: list[float] = field(default_factory=list)
    passed: list[int] = field(default_factory=list)
    mismatches: int = 0

    def summary(self) -> JSON:
        return {
            "server": self.server,
            "mode": self.mode,
            "size": self.size,
            "pods": self.pods,
            "count": len(self.total_ms),
            "filter": percentiles(self.filter_ms),
            "prioritize": percentiles(self.prioritize_ms),
            "total": percentiles(self.total_ms),
            "passed_mean": round(sum(self.passed) / len(self.passed), 1) if self.passed else 0,
            "mismatches": self.mismatches,
        }


HAND_WRITTEN = ("baseline", "lean", "go")


def go_toolchain() -> str | None:
    beside = Path(sys.executable).parent / "go"
    return os.environ.get("GO") or (str(beside) if beside.exists() else None) or shutil.which("go")


def go_extender(build_dir: Path) -> str | None:
    """The Go extender built from `go_extender/` with the toolchain at $GO (or `go` beside this Python, as
    `pip install '.[bench]'` puts it, or on the PATH), offline; None, with a note, when there is no
    toolchain or the build fails."""
    go = go_toolchain()
    if not go:
        print("no Go toolchain (set GO=/path/to/go): the Go extender is left out", file=sys.stderr)
        return None
    target = build_dir / "go-extender"
    # The build cache outlives the run (the standard library takes most of a minute to compile here).
    cache = Path(tempfile.gettempdir()) / "rulesched-bench-go"
    env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=mod", CGO_ENABLED="0",
               GOCACHE=str(cache / "cache"), GOPATH=str(cache / "path"))  # fmt: skip
    command = [go, "build", "-trimpath", "-o", str(target), "."]
    built = subprocess.run(command, cwd=HERE / "go_extender", env=env, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        print(f"the Go extender did not build, left out: {built.stderr.strip()[:500]}", file=sys.stderr)
        return None
    return str(target)


def servers(quick: bool, go: str | None = None) -> list[Server]:
    sizes = (100,) if quick else SIZES
    celpy = (100,) if quick else CELPY_SIZES
    found: list[Server] = [Server("floor", "floor", None, None, sizes)]
    for rules in RULE_SETS:
        found.append(Server(f"lean/{rules}", "lean", rules, None, sizes))
        if go:
            found.append(Server(f"go/{rules}", "go", rules, None, sizes, program=go))
        found.append(Server(f"baseline/{rules}", "baseline", rules, None, sizes))
        found.append(Server(f"rulesched-cpp/{rules}", "rulesched", rules, "cpp", sizes))
        # The same server with the other rule set as its shadow rules: its latency is the price of a shadow.
        other = next(name for name in RULE_SETS if name != rules)
        found.append(Server(f"rulesched-cpp-shadow/{rules}", "rulesched", rules, "cpp", sizes, shadow=other))
        found.append(Server(f"rulesched-celpy/{rules}", "rulesched", rules, "celpy", celpy))
    return found


def run_scenario(clients: Mapping[str, Client], servers: Sequence[Server], nodes: Sequence[JSON], pods: Iterator[JSON],
                 mode: str, kind: str, budget: Budget) -> list[Scenario]:  # fmt: skip
    """Each pod sent to every server in turn (rotating who goes first), so that they share the noise."""
    scenarios = {s.name: Scenario(s.name, mode, len(nodes), kind) for s in servers}
    if mode == "full" and len(nodes) >= 5000:  # 60 MB per request: a few pods say enough
        budget = dataclasses.replace(budget, warmup=1, min_pods=min(budget.min_pods, 3), max_pods=5)
    for _ in range(budget.warmup):
        pod = next(pods)
        for server in servers:
            one_pod(clients[server.name], pod, nodes, mode, server)
    deadline = time.monotonic() + budget.seconds * len(servers)
    for count in itertools.count():
        if count >= budget.max_pods or (count >= budget.min_pods and time.monotonic() > deadline):
            break
        pod = next(pods)
        first = count % len(servers)
        for server in [*servers[first:], *servers[:first]]:
            filter_ms, prioritize_ms, passed, matches = one_pod(clients[server.name], pod, nodes, mode, server)
            scenario = scenarios[server.name]
            scenario.filter_ms.append(filter_ms)
            scenario.prioritize_ms.append(prioritize_ms)
            scenario.total_ms.append(filter_ms + prioritize_ms)
            scenario.passed.append(passed)
            scenario.mismatches += not matches
    return list(scenarios.values())


MODES = ("names", "full")
POD_KINDS = ("replica", "new", "cold")
"""replica: replicas of one workload. new: each pod from a workload never seen (in a known namespace and
zone, as most new workloads are). cold: a new workload in a namespace never seen, so that the pod key
(every field the book reads: the founding example's match condition reads the namespace) is new and
its match conditions run again; a per-pod rule still finds what it computed for a pod alike in the
fields it reads itself (the zone rule: one of three zones)."""


def pod_stream(workload: Workload, kind: str, workloads: Iterator[int]) -> Iterator[JSON]:
    if kind == "replica":
        return iter(workload.pods(10_000, replicas=True))
    if kind == "new":
        return (workload.pod(next(workloads)) for _ in itertools.count())
    return (workload.pod(n, namespace=f"team-{n}") for n in workloads)


def bench_group(
    group: Sequence[Server],
    workload: Workload,
    files: Path,
    budget: Budget,
    modes: Sequence[str] = MODES,
    kinds: Sequence[str] = POD_KINDS,
) -> tuple[list[Scenario], JSON]:
    """Run the servers of one rule set side by side; their scenarios and each one's memory."""
    scenarios: list[Scenario] = []
    memory: dict[str, JSON] = {}
    workloads = itertools.count(1)
    with contextlib.ExitStack() as stack:
        processes = {s.name: stack.enter_context(started(s, files)) for s in group}
        clients = {name: Client(port) for name, (_, port) in processes.items()}
        for name, (process, _) in processes.items():
            memory[name] = {"rss_started_mb": memory_mb(process.pid)["rss_mb"]}
        for mode in modes:
            for size in sorted({size for s in group for size in s.sizes}):
                for kind in kinds:
                    active = [s for s in group if size in s.sizes]
                    pods = pod_stream(workload, kind, workloads)
                    found = run_scenario(clients, active, workload.nodes[:size], pods, mode, kind, budget)
                    for scenario in found:
                        print(f"  {line(scenario.summary())}", file=sys.stderr, flush=True)
                    scenarios.extend(found)
            if mode == "names":
                for name, (process, _) in processes.items():
                    memory[name]["rss_after_names_mb"] = memory_mb(process.pid)["rss_mb"]
        for name, (process, _) in processes.items():
            clients[name].close()
            memory[name].update(memory_mb(process.pid))
    return scenarios, memory


def line(summary: JSON) -> str:
    total, filtered, prioritized = summary["total"], summary["filter"], summary["prioritize"]
    return (
        f"{summary['server']:<30} {summary['mode']:<5} {summary['size']:>5} {summary['pods']:<7} "
        f"filter {filtered['p50']:>8} / {filtered['p99']:>8}  prioritize {prioritized['p50']:>8} / "
        f"{prioritized['p99']:>8}  total {total['p50']:>8} / {total['p99']:>8} ms  n={summary['count']}"
    )


def _key(result: JSON) -> tuple[Any, ...]:
    rules = result["server"].split("/")[1] if "/" in result["server"] else None
    return rules, result["mode"], result["size"], result["pods"]


def _ratio(p50: float | None, base: float | None) -> float | None:
    return round(p50 / base, 2) if p50 is not None and base else None


def add_ratios(results: list[JSON]) -> None:
    """Each scenario's p50 total over the best (fastest) hand-written extender's for the same rules, mode,
    size and pods, and over the Go extender's."""
    best: dict[tuple[Any, ...], float] = {}
    go: dict[tuple[Any, ...], float] = {}
    for r in results:
        p50 = r["total"]["p50"]
        if p50 is None or r["server"].split("/")[0] not in HAND_WRITTEN:
            continue
        best[_key(r)] = min(p50, best.get(_key(r), p50))
        if r["server"].startswith("go/"):
            go[_key(r)] = p50
    for result in results:
        hand_written = result["server"].split("/")[0] in HAND_WRITTEN
        result["ratio_to_best"] = None if hand_written else _ratio(result["total"]["p50"], best.get(_key(result)))
        result["ratio_to_go"] = _ratio(result["total"]["p50"], go.get(_key(result)))


def table(results: Sequence[JSON], memory: JSON) -> str:
    header = (
        "| server | mode | nodes | pods | filter p50 | filter p99 | prioritize p50 | prioritize p99 "
        "| total p50 | total p99 | x best hand-written | x Go | n | peak RSS MB |"
    )
    rows = [header, "|" + "---|" * 14]
    for r in results:
        rss = memory.get(r["server"], {}).get("peak_rss_mb", "")
        best, go = ("" if r[k] is None else r[k] for k in ("ratio_to_best", "ratio_to_go"))
        rows.append(
            f"| {r['server']} | {r['mode']} | {r['size']} | {r['pods']} | {r['filter']['p50']} | {r['filter']['p99']} "
            f"| {r['prioritize']['p50']} | {r['prioritize']['p99']} | {r['total']['p50']} | {r['total']['p99']} "
            f"| {best} | {go} | {r['count']} | {rss} |"
        )
    return "\n".join(rows)


def machine() -> JSON:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def _choice(given: str, known: Sequence[str]) -> list[str]:
    chosen = [part.strip() for part in given.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in known]
    if unknown or not chosen:
        raise SystemExit(f"choose among {', '.join(known)}; got {given!r}")
    return chosen


def shadow_burst(quick: bool) -> list[JSON]:
    """The shadow burst scenario (bench/shadow.py), small with `quick`."""
    sizes, pods, rounds = SHADOW_QUICK if quick else SHADOW_FULL
    return shadow.run(sizes, pods, rounds, shadow.RATE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the rulesched extender against a hand-written one.")
    parser.add_argument("--quick", action="store_true", help="CI smoke mode: one size, few pods, under a minute")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "latest.json", help="where to write results")
    parser.add_argument(
        "--only",
        default="",
        help="run only the servers whose name contains this text (burst, shadow-burst: those scenarios)",
    )
    parser.add_argument("--sizes", default="", help="comma-separated candidate counts instead of the defaults")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: names, full")
    parser.add_argument("--pods", default=",".join(POD_KINDS), help="comma-separated: replica, new, cold")
    parser.add_argument(
        "--max-pods",
        type=int,
        default=0,
        help=f"pods per scenario at most (default {FULL_BUDGET.max_pods}; each scenario still stops after its"
        f" time, {FULL_BUDGET.seconds:g} s a server): more pods make a steadier p99",
    )
    args = parser.parse_args(argv)
    modes, kinds = _choice(args.modes, MODES), _choice(args.pods, POD_KINDS)
    # Stopped from outside: unwind, so that every server started is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started_at = time.monotonic()
    budget = QUICK_BUDGET if args.quick else FULL_BUDGET
    if args.max_pods > 0:
        budget = dataclasses.replace(budget, max_pods=args.max_pods, min_pods=min(budget.min_pods, args.max_pods))
    results: list[JSON] = []
    memory: dict[str, JSON] = {}
    with tempfile.TemporaryDirectory(prefix="rulesched-bench-") as directory:
        files = Path(directory)
        only = args.only.split(",")
        go = go_extender(files) if any(o in "go/founding" or o in "go/pod-dependent" for o in only) else None
        chosen = [s for s in servers(args.quick, go) if any(o in s.name for o in only)]
        if args.sizes:
            sizes = tuple(int(n) for n in args.sizes.split(","))
            chosen = [dataclasses.replace(s, sizes=sizes) for s in chosen]
        workload = make_workload(max((max(s.sizes) for s in chosen), default=0))
        write_inputs(workload, files)
        for rules in RULE_SETS if chosen else ():
            group = [s for s in chosen if s.rules == rules or (s.kind == "floor" and rules == "founding")]
            if not group:
                continue
            print(f"{rules}: {', '.join(s.name for s in group)}", file=sys.stderr, flush=True)
            scenarios, found = bench_group(group, workload, files, budget, modes, kinds)
            memory.update(found)
            results.extend(s.summary() for s in scenarios)
    add_ratios(results)
    bursts = burst.run(*BURST_QUICK if args.quick else BURST_FULL) if any(o in "burst" for o in only) else []
    shadowed = shadow_burst(args.quick) if any(o in "shadow-burst" and o != "burst" for o in only) else []
    report = {
        "machine": machine(),
        "quick": args.quick,
        "seconds": round(time.monotonic() - started_at, 1),
        "scenarios": results,
        "memory": memory,
        "burst": bursts,
        "shadow_burst": shadowed,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print(table(results, memory))
    if bursts:
        print(f"\nBurst (in process, names mode; bench/burst.py):\n{burst.table(bursts)}")
    if shadowed:
        print(f"\nShadow burst (names mode; bench/shadow.py):\n{shadow.table(shadowed)}")
    print(f"\n{machine()}; {report['seconds']} s; written to {args.json}")
    mismatched = sum(r["mismatches"] for r in results)
    if mismatched:
        print(f"{mismatched} filter answers differed from the hand-written extender's", file=sys.stderr)
    return 1 if mismatched else 0


if __name__ == "__main__":
    raise SystemExit(main())
