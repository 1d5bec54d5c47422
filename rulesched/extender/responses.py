"""The JSON answers of the HTTP edge: a body already encoded, sent with the headers Starlette would give it."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class JsonResponse(Response):
    """A JSON body already encoded, with the headers Starlette's `Response` would give it (content-length,
    content-type), set directly: every filter and prioritize answer is one."""

    media_type = "application/json"

    def __init__(self, body: bytes, status_code: int = 200) -> None:
        self.status_code, self.body, self.background = status_code, body, None
        self.raw_headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]


def json_response(content: Any, status_code: int = 200) -> Response:
    return JsonResponse(orjson.dumps(content), status_code)


def encoded(body: bytes) -> Response:
    return JsonResponse(body)


def error_response(status_code: int, message: str) -> Response:
    return json_response({"error": message}, status_code)
