"""Memory per cached node: RSS of each server holding N nodes for names mode, and the bytes each node adds.

Usage: `python bench/rss.py [--sizes 1000,5000] [--pods 20] [--only lean,go,cpp] [--json FILE]`

For each size, every server of `bench/run.py` that serves names mode (the lean Python and the Go
extenders of the founding example, rulesched on each rule set with the default engine) is started on
the same `--nodes` file of that many benchmark nodes, then sent `--pods` pods (filter then prioritize,
every node a candidate, so that rulesched builds every node's context, memo and verdicts), and its RSS
is read from /proc. The bytes per cached node are the slope between the smallest and the largest size
((RSS_large - RSS_small) / (large - small)): what one more node costs, the process's fixed cost apart.
Each rulesched row also gives its RSS over the lean Python extender's at the largest size (the issue's
target: at most 1.3). Bounded: `--pods` pods per server and size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.harness import Client, Server, memory_mb, one_pod, started, write_inputs  # noqa: E402
from bench.run import go_extender  # noqa: E402
from bench.workload import make_workload  # noqa: E402

JSON = dict[str, Any]


def servers(go: str | None) -> list[Server]:
    found = [Server("lean/founding", "lean", "founding", None, ())]
    if go:
        found.append(Server("go/founding", "go", "founding", None, (), program=go))
    found += [
        Server(f"rulesched-cpp/{rules}", "rulesched", rules, "cpp", ()) for rules in ("founding", "pod-dependent")
    ]
    return found


def resident(server: Server, size: int, pods: int, files: Path) -> float:
    """The server's RSS in MB after `pods` pods over all `size` nodes of `files`."""
    workload = make_workload(size)
    with started(server, files) as (process, port):
        client = Client(port)
        for pod in workload.pods(pods, replicas=False):
            one_pod(client, pod, workload.nodes, "names", server)
        client.close()
        return memory_mb(process.pid)["rss_mb"]


def measure(sizes: Sequence[int], pods: int, only: Sequence[str]) -> list[JSON]:
    rows: dict[str, JSON] = {}
    with tempfile.TemporaryDirectory(prefix="rulesched-rss-") as directory:
        build = Path(directory)
        go = go_extender(build) if any(o in "go/founding" for o in only) else None
        chosen = [s for s in servers(go) if any(o in s.name for o in only)]
        for size in sizes:
            files = build / str(size)
            files.mkdir()
            write_inputs(make_workload(size), files)
            for server in chosen:
                rss = resident(server, size, pods, files)
                rows.setdefault(server.name, {"server": server.name})[f"rss_mb_{size}"] = rss
                print(f"  {server.name:<28} {size:>6} nodes  RSS {rss:8.1f} MB", file=sys.stderr, flush=True)
    small, large = min(sizes), max(sizes)
    lean = rows.get("lean/founding", {}).get(f"rss_mb_{large}")
    for row in rows.values():
        if large > small:
            added = (row[f"rss_mb_{large}"] - row[f"rss_mb_{small}"]) * 1024 * 1024 / (large - small)
            row["bytes_per_node"] = round(added)
        row["ratio_to_lean"] = round(row[f"rss_mb_{large}"] / lean, 2) if lean else None
    return list(rows.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="RSS per cached node, names mode.")
    parser.add_argument("--sizes", default="1000,5000", help="comma-separated node counts (at least two)")
    parser.add_argument("--pods", type=int, default=20, help="pods sent to each server at each size")
    parser.add_argument("--only", default="", help="only the servers whose name contains one of these texts")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    sizes = sorted(int(n) for n in args.sizes.split(","))
    rows = measure(sizes, args.pods, args.only.split(","))
    large = max(sizes)
    print(f"| server | RSS MB at {' / '.join(map(str, sizes))} nodes | bytes per cached node | RSS / lean Python |")
    print("|---|---:|---:|---:|")
    for row in rows:
        rss = " / ".join(str(row[f"rss_mb_{size}"]) for size in sizes)
        ratio = "" if row["ratio_to_lean"] is None or row["server"].startswith("lean") else row["ratio_to_lean"]
        print(f"| {row['server']} | {rss} | {row.get('bytes_per_node', '')} | {ratio} |")
    if args.json:
        args.json.write_bytes(
            orjson.dumps({"sizes": sizes, "largest": large, "rows": rows}, option=orjson.OPT_INDENT_2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
