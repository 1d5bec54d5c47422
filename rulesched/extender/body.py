"""Reading a request's body: whole, at most `--max-body-bytes`, arrived within `--body-timeout`; a client that
sends more, or stops sending, gets a clear error (413, 408) and costs nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine

from starlette.requests import ClientDisconnect, Request

from rulesched.extender.connection import BODY_ARRIVED
from rulesched.settings import Settings


class BodyTooLargeError(Exception):
    """The request body is larger than `--max-body-bytes` (said by its content-length, or found reading it)."""


class BodyTimeoutError(Exception):
    """The request body did not arrive within `--body-timeout` (a client that stopped sending)."""


def body_of(request: Request, settings: Settings) -> Coroutine[object, object, bytes]:
    """The request's whole body, at most `--max-body-bytes`, arrived within `--body-timeout`: `read_body`'s
    coroutine, awaited by the verb (no frame of its own)."""
    arrived = bool(request.scope.get(BODY_ARRIVED))
    return read_body(request, settings.max_body_bytes, settings.body_timeout, arrived)


async def read_body(request: Request, limit: int, timeout: float, arrived: bool) -> bytes:
    """The whole body, at most `limit` bytes (`--max-body-bytes`), arrived within `timeout` seconds
    (`--body-timeout`); `arrived`: the connection saw it whole already (`BODY_ARRIVED`)."""
    for name, value in request.scope["headers"]:  # ASGI: names in lower case; read as they are, not parsed
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise BodyTooLargeError
            break
    receive = request.receive
    first = []
    if arrived:  # here already: taken without a timer (`asyncio.timeout` costs 3 µs)
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            body: bytes = message.get("body", b"")
            if len(body) > limit:
                raise BodyTooLargeError
            return body
        first.append(message)  # any other (a disconnect, say): read below as any message is
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = first.pop() if first else await receive()
                if message["type"] == "http.disconnect":
                    raise ClientDisconnect
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise BodyTooLargeError
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise BodyTimeoutError from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
