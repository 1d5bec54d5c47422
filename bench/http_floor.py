"""The HTTP floor of every server option uvicorn offers: which event loop and HTTP parser to serve with.

Usage: `python bench/http_floor.py [--size 1000] [--pods 300] [--only uvloop]`

Starts `floor_server.py` (a constant answer after reading the whole body) once per combination of
event loop (asyncio, uvloop), HTTP parser (h11, httptools) and application (Starlette, a bare ASGI
function), drives each over one keep-alive connection with the benchmark's names-mode requests (filter
then prioritize, as kube-scheduler does), and prints the p50 and p99 of a cycle. Nothing is evaluated,
so this is the least any extender on that stack can take. Bounded: `--pods` cycles per server, at
most 60 s each.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.harness import Client, Server, percentiles, request_body, started  # noqa: E402
from bench.workload import make_workload  # noqa: E402

OPTIONS = [
    (loop, http, bare)
    for loop, http, bare in itertools.product(("asyncio", "uvloop"), ("h11", "httptools"), (False, True))
]


def floor(loop: str, http: str, bare: bool) -> Server:
    """floor_server.py with one combination of options."""
    options = ("--loop", loop, "--http", http, *(("--bare",) if bare else ()))
    return Server(f"{loop}+{http}{'+bare' if bare else ''}", "floor", None, None, (), options=options)


def drive(port: int, bodies: Sequence[bytes], pods: int) -> list[float]:
    client = Client(port)
    cycles: list[float] = []
    deadline = time.monotonic() + 60
    for count in range(pods + 5):
        if time.monotonic() > deadline:
            break
        filtered, _ = client.post("/filter", bodies[count % len(bodies)])
        prioritized, _ = client.post("/prioritize", bodies[count % len(bodies)])
        if count >= 5:  # warm-up
            cycles.append(filtered + prioritized)
    client.close()
    return cycles


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The HTTP floor of each uvicorn option.")
    parser.add_argument("--size", type=int, default=1000, help="candidate node names per request")
    parser.add_argument("--pods", type=int, default=300, help="measured cycles per server")
    parser.add_argument("--only", default="", help="only the combinations whose name contains this text")
    args = parser.parse_args(argv)
    workload = make_workload(args.size)
    bodies = [request_body(pod, workload.nodes, "names") for pod in workload.pods(20, replicas=False)]
    print(f"| loop + parser (+ bare ASGI) | cycle p50 ms | cycle p99 ms | n |  ({args.size} names)")
    print("|---|---:|---:|---:|")
    for server in [floor(*option) for option in OPTIONS]:
        if args.only not in server.name:
            continue
        with started(server, HERE) as (_, port):
            found = percentiles(drive(port, bodies, args.pods))
        print(f"| {server.name} | {found['p50']} | {found['p99']} | {args.pods} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
