"""The HTTP connection: uvicorn's httptools protocol with a deadline on request headers and, for mutual TLS,
a check of the client certificate's names.

uvicorn times out only idle keep-alive connections. A client that connects and sends nothing, or sends
part of a request's headers and stops ("slow loris"), would hold its connection and its file descriptor
for as long as it likes: a few hundred of them exhaust the process's descriptors and no one else is
answered. Here a request's headers must arrive within `--body-timeout` of its first byte (or of the
connection, for the first request); the body then has the same time again (`body.body_of`). A client
that misses it gets a 408 and its connection is closed.

Each connection also says when it is reading or answering a request (`Idle`, from a request's first byte to
its answer's last): the work done after the answers (shadow comparisons, recordings) waits for the moments
when none is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rulesched.handoff.idle import Idle

log = logging.getLogger("rulesched")


def certificate_names(peer: Mapping[str, Any]) -> set[str]:
    """A client certificate's subject common names and DNS/URI subject alternative names."""
    names = {value for rdn in peer.get("subject", ()) for key, value in rdn if key == "commonName"}
    names |= {value for kind, value in peer.get("subjectAltName", ()) if kind in ("DNS", "URI")}
    return names


def timeout_answer(seconds: float) -> bytes:
    """The 408 sent to a client whose request headers did not arrive in time."""
    body = orjson.dumps({"error": f"request headers did not arrive within {seconds:g} s (--body-timeout)"})
    head = f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return head.encode() + b"connection: close\r\n\r\n" + body


BODY_ARRIVED = "rulesched.body_arrived"
"""A request's ASGI scope key, true once its whole body has arrived: `receive()` then returns it at once, and
the extender reads it without setting a timer (`body.body_of`)."""


def connection_protocol(
    header_timeout: float, allowed_names: frozenset[str] = frozenset(), idle: Idle | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, closing a connection whose request headers take longer than `header_timeout`
    seconds and, when `allowed_names` are given, a TLS connection whose client certificate names none of them
    (before reading a byte: the CA alone vouches only that the certificate is from the cluster). A request's
    scope says when its whole body has arrived (`BODY_ARRIVED`). `idle` is told when a request begins to be read
    and when its answer has been sent (or the connection is lost first).

    The header deadline is one timer per connection, not one per request: each request notes when its
    headers began to be awaited, and the timer, when it fires, closes the connection if those are late, or
    is set again for when they will be (a timer set and cancelled for every request cost more than parsing
    its headers)."""

    class Connection(HttpToolsProtocol):
        headers_due: asyncio.TimerHandle | None = None
        """The connection's header deadline timer, while one is set."""
        awaited_since: float | None = None
        """When the current request's headers began to be awaited (event loop time); None once they arrived."""
        reading = False
        """A request is being read or answered (counted in `idle`)."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if allowed_names:
                peer = transport.get_extra_info("peercert") or {}
                if not certificate_names(peer) & allowed_names:
                    log.warning("refused a client certificate named %s", sorted(certificate_names(peer)) or "nothing")
                    transport.abort()
                    return
            self._expect_headers()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._expect_headers()
            if idle is not None and not self.reading:
                self.reading = True
                idle.busy()

        def on_response_complete(self) -> None:
            self._answered()
            super().on_response_complete()

        def _answered(self) -> None:
            if self.reading:
                self.reading = False
                idle.done()  # type: ignore[union-attr]  # set only with one

        def on_headers_complete(self) -> None:
            self.awaited_since = None
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            if self.cycle is not None:
                self.cycle.scope[BODY_ARRIVED] = True  # type: ignore[literal-required]  # a key of our own

        def connection_lost(self, exc: Exception | None) -> None:
            self._answered()
            self.awaited_since = None
            if self.headers_due is not None:
                self.headers_due.cancel()
                self.headers_due = None
            super().connection_lost(exc)

        def _expect_headers(self) -> None:
            self.awaited_since = self.loop.time()
            if self.headers_due is None:
                self.headers_due = self.loop.call_at(self.awaited_since + header_timeout, self._check_headers)

        def _check_headers(self) -> None:
            self.headers_due = None
            if self.awaited_since is None:  # none awaited: the next request sets the timer again
                return
            due = self.awaited_since + header_timeout
            if self.loop.time() < due:  # another request's, begun since the timer was set
                self.headers_due = self.loop.call_at(due, self._check_headers)
            elif not self.transport.is_closing():
                self.transport.write(timeout_answer(header_timeout))
                self.transport.close()

    return Connection
