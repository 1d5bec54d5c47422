"""A small Prometheus on loopback, answering `/api/v1/query` with the answers a real Prometheus 2.42 gave.

Each answer is a recording of `tests/fixtures/prometheus-v2.42` (status line and headers as recorded, the
body byte for byte, its Content-Length recomputed when a test renames a series' node). The test says
which recording answers which PromQL text (`answer`), may make an answer late (`delay`: a timeout), may
serve over TLS (`tls`), and may stop the server and start it again on the same port (`go_down`,
`come_back`: connection refused in between). Every request is kept (method, path, form, headers) for
the test to look at.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from tests.paths import FIXTURES

PROMETHEUS_FIXTURES = FIXTURES / "prometheus-v2.42"
"""Recorded from a real Prometheus 2.42.0 (see its INDEX.md)."""


@dataclass(frozen=True)
class Recording:
    """A recorded answer: the status line and headers, and the body."""

    head: bytes
    body: bytes

    @classmethod
    def named(cls, name: str, **renames: str) -> Recording:
        """The recording `name` (its .json or .txt body), with each `old=new` text replaced in the body."""
        head = (PROMETHEUS_FIXTURES / f"{name}.headers").read_bytes()
        path = PROMETHEUS_FIXTURES / f"{name}.json"
        body = (path if path.exists() else PROMETHEUS_FIXTURES / f"{name}.txt").read_bytes()
        for old, new in renames.items():
            body = body.replace(old.encode(), new.encode())
        return cls(head, body)

    def wire(self) -> bytes:
        lines = [line for line in self.head.split(b"\r\n") if line and not line.lower().startswith(b"content-length")]
        lines.append(b"Content-Length: " + str(len(self.body)).encode())
        return b"\r\n".join(lines) + b"\r\n\r\n" + self.body


@dataclass
class Request:
    method: str
    path: str
    form: dict[str, str]
    headers: dict[str, str]


@dataclass
class _State:
    answers: dict[str, Recording] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    down: bool = False


UNKNOWN = "e01-bad-syntax-400-post"
"""What a query the test did not set up gets: the recorded 400 for bad PromQL."""


class Prometheus:
    """The loopback server; use as a context manager (`with Prometheus() as prometheus:`)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.state = _State()
        self.lock = threading.Lock()
        self.port = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.come_back()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def answer(self, query: str, name: str, **renames: str) -> None:
        """Answer `query` (its PromQL text) with the recording `name`, series renamed by `renames`."""
        with self.lock:
            self.state.answers[query] = Recording.named(name, **renames)

    def delay(self, query: str, seconds: float) -> None:
        """Answer `query` only after `seconds` (0: at once)."""
        with self.lock:
            self.state.delays[query] = seconds

    def requests(self) -> list[Request]:
        with self.lock:
            return list(self.state.requests)

    def go_down(self) -> None:
        """Stop listening and drop open connections: connections are refused until `come_back`."""
        with self.lock:
            self.state.down = True
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def come_back(self) -> None:
        """Listen again, on the same port as before (a new one the first time)."""
        with self.lock:
            self.state.down = False
        self._server = _Server(("127.0.0.1", self.port), _Handler, self)
        self.port = self._server.server_address[1]
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.go_down()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler], prometheus: Prometheus) -> None:
        super().__init__(address, handler)
        self.prometheus = prometheus

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-answer (a timeout) is not the test's failure


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer("GET", self.path.partition("?")[2])

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._answer("POST", self.rfile.read(length).decode())

    def _answer(self, method: str, encoded: str) -> None:
        prometheus = self.server.prometheus
        form = {key: values[-1] for key, values in parse_qs(encoded).items()}
        query = form.get("query", "")
        with prometheus.lock:
            if prometheus.state.down:  # a keep-alive connection from before the outage
                self.close_connection = True
                return
            headers = {key.lower(): value for key, value in self.headers.items()}
            prometheus.state.requests.append(Request(method, self.path.partition("?")[0], form, headers))
            recording = prometheus.state.answers.get(query) or Recording.named(UNKNOWN)
            delay = prometheus.state.delays.get(query, 0.0)
        _sleep(delay)
        with contextlib.suppress(OSError):
            self.wfile.write(recording.wire())
            self.wfile.flush()


def _sleep(seconds: float) -> None:
    deadline = time.monotonic() + min(seconds, 10.0)
    while time.monotonic() < deadline:
        time.sleep(0.01)


@contextlib.contextmanager
def prometheus_server() -> Iterator[Prometheus]:
    with Prometheus() as prometheus:
        yield prometheus
