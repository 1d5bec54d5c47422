"""The HTTP floor: the same stack (uvicorn + Starlette) reading each request body and answering a constant.

Nothing is decoded or evaluated, so its latency is what receiving the bytes costs on this machine;
no extender written on this stack can be faster.

Run: `python bench/floor_server.py --port 8891 [--loop asyncio|uvloop] [--http h11|httptools] [--bare]`
(`--bare`: a plain ASGI function instead of Starlette, to see what the framework costs).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

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


Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


async def bare_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """The same answers as a bare ASGI application: no routing, no request or response objects."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    body = {"/filter": _FILTER, "/prioritize": b"[]"}.get(scope["path"], b'{"status":"ok"}')
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto")
    parser.add_argument("--http", choices=("auto", "h11", "httptools"), default="auto")
    parser.add_argument("--bare", action="store_true", help="a plain ASGI function instead of Starlette")
    args = parser.parse_args(argv)
    app: Any = bare_app if args.bare else create_app()
    # Keep-alive as long as rulesched's (75 s): side by side, a connection may idle while others work.
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, timeout_keep_alive=75,
        loop=args.loop, http=args.http,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
