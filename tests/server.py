"""A real rulesched server on 127.0.0.1 for tests: in a background thread, or as a `rulesched serve` process.

Both listen on port 0, so the system picks a free port as it binds, and the test reads the port the
server got (from the socket in a thread, from uvicorn's start-up line for a process). Nothing picks a
port first and hopes it is still free when the server starts.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import uvicorn

from rulesched.extender.server import Parts, build, uvicorn_config
from rulesched.settings import Settings
from tests.paths import REPO

_START_TIMEOUT = 10.0
_PROCESS_START_TIMEOUT = 30.0
_LISTENING = re.compile(r"Uvicorn running on https?://127\.0\.0\.1:(\d+)")


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


@contextlib.contextmanager
def spawned(options: Sequence[str], log: Path) -> Iterator[int]:
    """`python -m rulesched serve --host 127.0.0.1 --port 0 OPTIONS`, its output in `log`; yields its port.

    The port is read from uvicorn's start-up line, so the process must log at info level (the default)."""
    with spawned_process(options, log) as process:
        yield process.port


class SpawnedServer:
    """A `rulesched serve` process: its port, and its process id (to read its memory in /proc)."""

    def __init__(self, port: int, pid: int) -> None:
        self.port = port
        self.pid = pid

    def peak_rss_mb(self) -> float:
        """The process's peak resident memory so far (VmHWM), in MB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmHWM in /proc/{self.pid}/status")


@contextlib.contextmanager
def spawned_process(options: Sequence[str], log: Path) -> Iterator[SpawnedServer]:
    """Like `spawned`, yielding the process's port and id."""
    command = [sys.executable, "-m", "rulesched", "serve", "--host", "127.0.0.1", "--port", "0", *options]
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=REPO, stdout=output, stderr=subprocess.STDOUT)
    try:
        yield SpawnedServer(_wait_for_port(process, log), process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_for_port(process: subprocess.Popen[bytes], log: Path) -> int:
    deadline = time.monotonic() + _PROCESS_START_TIMEOUT
    while time.monotonic() < deadline:
        found = _LISTENING.search(log.read_text(errors="replace"))
        if found:
            return int(found[1])  # uvicorn logs this line once the socket listens and the app has started
        if process.poll() is not None:
            raise RuntimeError(f"rulesched serve exited with {process.returncode}:\n{log.read_text()}")
        time.sleep(0.05)
    raise RuntimeError(f"rulesched serve did not start within {_PROCESS_START_TIMEOUT:g}s:\n{log.read_text()}")
