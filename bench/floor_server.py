"""The HTTP floor: the same stack (uvicorn + Starlette) reading each request body and answering a constant.

Nothing is decoded or evaluated, so its latency is what receiving the bytes costs on this machine;
no extender written on this stack can be faster.

Run: `python bench/floor_server.py --port 8891`
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_FILTER = b'{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}'


def create_app() -> Starlette:
    async def filter_verb(request: Request) -> Response:
        await request.body()
        return Response(_FILTER, media_type="application/json")

    async def prioritize_verb(request: Request) -> Response:
        await request.body()
        return Response(b"[]", media_type="application/json")

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
    args = parser.parse_args(argv)
    # Keep-alive as long as rulesched's (75 s): side by side, a connection may idle while others work.
    uvicorn.run(
        create_app(), host="127.0.0.1", port=args.port, log_level="warning", access_log=False, timeout_keep_alive=75
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
