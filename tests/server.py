"""A real rulesched server (uvicorn, the real app) on 127.0.0.1 for tests, in a background thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import uvicorn

from rulesched.extender.server import Parts, build, uvicorn_config
from rulesched.settings import Settings

_START_TIMEOUT = 10.0


class RunningServer:
    """A started server: its base URL and the parts it is made of (the rule store, the cluster)."""

    def __init__(self, url: str, parts: Parts) -> None:
        self.url = url
        self.parts = parts


@contextlib.contextmanager
def running(settings: Settings) -> Iterator[RunningServer]:
    """Start the server described by `settings` (port 0 picks a free one) and stop it afterwards."""
    parts = build(settings.model_copy(update={"host": "127.0.0.1", "port": 0}))
    server = uvicorn.Server(uvicorn_config(parts))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + _START_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    scheme = "https" if settings.tls_cert_file else "http"
    try:
        yield RunningServer(f"{scheme}://127.0.0.1:{port}", parts)
    finally:
        server.should_exit = True
        thread.join(_START_TIMEOUT)


@contextlib.contextmanager
def running_server(settings: Settings) -> Iterator[str]:
    """Like `running`, yielding only the base URL."""
    with running(settings) as server:
        yield server.url
