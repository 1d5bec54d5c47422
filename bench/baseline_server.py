"""The hand-written extender the benchmark compares rulesched with: the same rules in plain Python.

What an engineer would write without rulesched: Starlette + orjson, the rules as Python code, nodes and
metrics loaded from the same files, no CEL, no caches beyond the node and metrics dictionaries, and no
garbage-collector tuning. `decide` is also the benchmark's oracle: rulesched must pass the same nodes.

Run: `python bench/baseline_server.py --port 8890 --nodes nodes.json --metrics metrics.json --rules founding`
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

JSON = dict[str, Any]
_CPU_SUFFIX = {"n": 1e-9, "u": 1e-6, "m": 1e-3}
_REASONS = {
    "xy": "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)",
    "zone": "not in the pod's zone (rule zone-and-ready/same-zone)",
    "ready": "node is not Ready (rule zone-and-ready/node-ready)",
}


def cpu_cores(quantity: str) -> float:
    """A CPU quantity as metrics-server writes it (`123456789n`, `250m`, `2`) in cores."""
    factor = _CPU_SUFFIX.get(quantity[-1:])
    return float(quantity[:-1]) * factor if factor else float(quantity)


def usage_by_node(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {item["metadata"]["name"]: cpu_cores(item["usage"]["cpu"]) for item in metrics["items"]}


def _reason(pod: JSON, node: JSON, pod_rules: bool) -> str | None:
    """Why `node` fails the filters, in rule-set order (xy-least-cpu, then zone-and-ready), or None."""
    labels = node["metadata"].get("labels") or {}
    applies = pod["metadata"].get("namespace") != "kube-system"
    if applies and "filter.xy.com" not in labels:
        return _REASONS["xy"]
    if not pod_rules:
        return None
    zone = (pod["metadata"].get("labels") or {}).get("topology.kubernetes.io/zone")
    if zone is not None and labels.get("topology.kubernetes.io/zone") != zone:
        return _REASONS["zone"]
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or [])
    return None if ready else _REASONS["ready"]


def decide(pod: JSON, nodes: Sequence[JSON], pod_rules: bool) -> tuple[list[JSON], dict[str, str]]:
    """The nodes that pass, and each failing node's reason."""
    passed, failed = [], {}
    for node in nodes:
        reason = _reason(pod, node, pod_rules)
        if reason is None:
            passed.append(node)
        else:
            failed[node["metadata"]["name"]] = reason
    return passed, failed


def scores(pod: JSON, names: Sequence[str], usage: Mapping[str, float]) -> dict[str, int]:
    """Least CPU used wins: min-max over the candidates with metrics, 0 for those without."""
    if pod["metadata"].get("namespace") == "kube-system":
        return dict.fromkeys(names, 0)
    raws = {name: -usage[name] for name in names if name in usage}
    if not raws:
        return dict.fromkeys(names, 0)
    low, high = min(raws.values()), max(raws.values())
    result = {}
    for name in names:
        raw = raws.get(name)
        if raw is None:
            result[name] = 0
        elif high == low:
            result[name] = 10
        else:
            result[name] = math.floor(round(10 * (raw - low) / (high - low), 9) + 0.5)
    return result


def create_app(nodes: Mapping[str, JSON], usage: Mapping[str, float], pod_rules: bool) -> Starlette:
    async def filter_verb(request: Request) -> Response:
        args = orjson.loads(await request.body())
        pod = args["Pod"]
        full = args.get("Nodes") is not None
        candidates = args["Nodes"]["items"] if full else [nodes[n] for n in args["NodeNames"]]
        passed, failed = decide(pod, candidates, pod_rules)
        answer = {
            "Nodes": {"metadata": {}, "items": passed} if full else None,
            "NodeNames": None if full else [n["metadata"]["name"] for n in passed],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": failed,
            "Error": "",
        }
        return Response(orjson.dumps(answer), media_type="application/json")

    async def prioritize_verb(request: Request) -> Response:
        args = orjson.loads(await request.body())
        full = args.get("Nodes") is not None
        names = [n["metadata"]["name"] for n in args["Nodes"]["items"]] if full else args["NodeNames"]
        found = scores(args["Pod"], names, usage)
        return Response(
            orjson.dumps([{"Host": h, "Score": s} for h, s in found.items()]), media_type="application/json"
        )

    async def healthz(request: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    return Starlette(
        routes=[
            Route("/filter", filter_verb, methods=["POST"]),
            Route("/prioritize", prioritize_verb, methods=["POST"]),
            Route("/healthz", healthz),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--nodes", type=Path, required=True)
    parser.add_argument("--metrics", type=Path, required=True)
    parser.add_argument("--rules", choices=("founding", "pod-dependent"), required=True)
    args = parser.parse_args(argv)
    nodes = {n["metadata"]["name"]: n for n in orjson.loads(args.nodes.read_bytes())["items"]}
    usage = usage_by_node(orjson.loads(args.metrics.read_bytes()))
    app = create_app(nodes, usage, args.rules == "pod-dependent")
    # Keep-alive as long as rulesched's (75 s): side by side, a connection may idle while others work.
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, timeout_keep_alive=75)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
