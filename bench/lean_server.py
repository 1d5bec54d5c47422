"""The lean hand-written Python extender of the founding example: only what its rule needs, in memory.

What a competent engineer writes by hand with Starlette, uvicorn (uvloop, httptools) and orjson, and no
rules engine: a node passes when it has the label `filter.xy.com`; prioritize prefers the lowest CPU
usage, min-max normalised over the candidates to an integer 0..10 (floor), all equal → 10, a node with
no metrics → 0. It keeps only each node's labels and CPU usage (the Go extender in `go_extender/` does the
same), unlike `baseline_server.py`, which keeps whole node objects. With `--pod-rules`, the benchmark's
pod-dependent rules too (`bench/workload.py` POD_RULES): a node passes only if it is in the pod's
`topology.kubernetes.io/zone` (when the pod has that label) and Ready (then it also keeps which nodes are).
Adapted from the team's bench-kit `py-extender`.

    python bench/lean_server.py --port 18082 --metrics metrics.json --nodes nodes.json [--pod-rules]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

LABEL = "filter.xy.com"
REASON = "missing label " + LABEL
ZONE = "topology.kubernetes.io/zone"
ZONE_REASON = "not in the pod's zone"
READY_REASON = "node is not Ready"
SUFFIX = {"n": 1, "u": 10**3, "m": 10**6}

CPU: dict[str, int] = {}
"""Node name → CPU usage in nanocores."""
LABELS: dict[str, dict[str, str]] = {}
"""The node cache for names mode: node name → labels."""
READY: set[str] = set()
"""With --pod-rules, names mode: the Ready nodes."""
POD_RULES: list[bool] = [False]


def parse_cpu(quantity: str) -> int:
    """A CPU quantity ("1234567n", "250u", "250m", "2", "1.5") in nanocores."""
    scale = SUFFIX.get(quantity[-1:])
    if scale:
        quantity = quantity[:-1]
    return int(Decimal(quantity) * (scale or 10**9))


def load(metrics: str, nodes: str | None) -> None:
    """Fill CPU and LABELS from the files; nothing else of them stays (the decoded lists are freed on return,
    not kept alive by the serving function's frame)."""
    with open(metrics, "rb") as file:
        CPU.update((m["metadata"]["name"], parse_cpu(m["usage"]["cpu"])) for m in orjson.loads(file.read())["items"])
    if nodes:
        with open(nodes, "rb") as file:
            items = orjson.loads(file.read())["items"]
            LABELS.update((n["metadata"]["name"], n["metadata"].get("labels") or {}) for n in items)
            if POD_RULES[0]:
                READY.update(n["metadata"]["name"] for n in items if _ready(n))


def json_response(obj: object) -> Response:
    return Response(orjson.dumps(obj), media_type="application/json")


def _ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or ())


def _reason(labels: dict[str, str], ready: bool, zone: str | None) -> str | None:
    if LABEL not in labels:
        return REASON
    if not POD_RULES[0]:
        return None
    if zone is not None and labels.get(ZONE) != zone:
        return ZONE_REASON
    return None if ready else READY_REASON


def _filter_full(args: dict[str, Any], zone: str | None, failed: dict[str, str]) -> dict[str, Any]:
    passing = []
    pod_rules = POD_RULES[0]
    for node in args["Nodes"]["items"]:
        meta = node["metadata"]
        reason = _reason(meta.get("labels") or {}, pod_rules and _ready(node), zone)
        if reason is None:
            passing.append(node)
        else:
            failed[meta["name"]] = reason
    return {"metadata": args["Nodes"].get("metadata", {}), "items": passing}


def _filter_names(names: Sequence[str], zone: str | None, failed: dict[str, str]) -> list[str]:
    passing = []
    if not POD_RULES[0]:  # the founding example alone: one label lookup per name
        for name in names:
            if LABEL in LABELS.get(name, ()):
                passing.append(name)
            else:
                failed[name] = REASON
        return passing
    for name in names:
        reason = _reason(LABELS.get(name, {}), name in READY, zone)
        if reason is None:
            passing.append(name)
        else:
            failed[name] = reason
    return passing


async def filter_verb(request: Request) -> Response:
    args = orjson.loads(await request.body())
    failed: dict[str, str] = {}
    result: dict[str, Any] = {"Nodes": None, "NodeNames": None, "FailedNodes": failed}
    zone = (args["Pod"]["metadata"].get("labels") or {}).get(ZONE) if POD_RULES[0] else None
    if args.get("Nodes") is not None:
        result["Nodes"] = _filter_full(args, zone, failed)
    elif args.get("NodeNames") is not None:
        result["NodeNames"] = _filter_names(args["NodeNames"], zone, failed)
    else:
        return PlainTextResponse("request has neither Nodes nor NodeNames", status_code=400)
    result.update(FailedAndUnresolvableNodes={}, Error="")
    return json_response(result)


async def prioritize_verb(request: Request) -> Response:
    args = orjson.loads(await request.body())
    if args.get("Nodes") is not None:
        names = [n["metadata"]["name"] for n in args["Nodes"]["items"]]
    elif args.get("NodeNames") is not None:
        names = args["NodeNames"]
    else:
        return PlainTextResponse("request has neither Nodes nor NodeNames", status_code=400)
    known = [CPU[n] for n in names if n in CPU]
    low, high = (min(known), max(known)) if known else (0, 0)
    scores = []
    for name in names:
        usage = CPU.get(name)
        score = 0 if usage is None else 10 if high == low else (high - usage) * 10 // (high - low)
        scores.append({"Host": name, "Score": score})
    return json_response(scores)


async def healthz(_: Request) -> Response:
    return PlainTextResponse("ok")


app = Starlette(
    routes=[
        Route("/filter", filter_verb, methods=["POST"]),
        Route("/prioritize", prioritize_verb, methods=["POST"]),
        Route("/healthz", healthz),
    ]
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--metrics", required=True, help="a NodeMetricsList JSON file")
    parser.add_argument("--nodes", help="a NodeList JSON file: the node cache for names mode")
    parser.add_argument("--pod-rules", action="store_true", help="also the pod-dependent rules: zone, Ready")
    args = parser.parse_args(argv)
    POD_RULES[0] = args.pod_rules
    load(args.metrics, args.nodes)
    # The same uvicorn options as rulesched's and the floor's (keep-alive 75 s: side by side, a connection
    # may idle while the other servers work).
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, timeout_keep_alive=75)


if __name__ == "__main__":
    main()
