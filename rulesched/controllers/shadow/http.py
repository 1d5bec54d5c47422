"""The shadow rules over HTTP: `GET /shadow`, the summary of what they would change (`Shadow.status`), or a 404
that says how to turn them on when the server runs without them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rulesched.controllers.shadow.controller import Shadow

NOT_RUNNING = "no shadow rules: start rulesched serve with --shadow-rules DIR"


def route(current: Callable[[], Shadow | None]) -> Route:
    """`GET /shadow`, answered from the shadow controller `current()` gives at the time of the request (the server
    sets it once the shadow store is built, after the app)."""

    async def shadow(request: Request) -> Response:
        running = current()
        if running is None:
            return _json({"error": NOT_RUNNING}, 404)
        return _json(running.status())

    return Route("/shadow", shadow)


def _json(content: Any, status_code: int = 200) -> Response:
    """The JSON answer, with the headers the extender's answers have (content-length, content-type)."""
    return Response(orjson.dumps(content), status_code, media_type="application/json")
