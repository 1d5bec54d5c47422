"""What every benchmark script drives a server with: the server processes (`Server`, `started`, `stop`), one
keep-alive client (`Client`, `request_body`, `one_pod`), the inputs they read (`write_inputs`), and how
results are summed up and reported (`percentiles`, `counted`, `reported`, `memory_mb`).

`run.py` (the side-by-side latency table) and the scenario scripts (`shadow.py`, `poll.py`, `rss.py`, ...)
all stand on this module; it imports none of them.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.baseline_server import decide
from bench.workload import RULE_SETS, Workload

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JSON = dict[str, Any]


@dataclass(frozen=True)
class Server:
    """One server process to start: what it is and the command that runs it."""

    name: str
    kind: str  # rulesched | baseline | lean | go | floor
    rules: str | None
    engine: str | None
    sizes: tuple[int, ...]
    program: str | None = None
    """The executable of a compiled server (the Go extender)."""
    options: tuple[str, ...] = ()
    """More arguments for the floor server (its event loop, parser, application) or for rulesched."""
    shadow: str | None = None
    """rulesched only: the rule set loaded as its shadow rules (`--shadow-rules`), decided after each answer."""
    kubeconfig: str | None = None
    """rulesched only: a real cluster's kubeconfig; nodes, pods and namespaces then come from its API, not
    from `nodes.json` (bench/real_scheduler.py)."""

    def argv(self, port: int, files: Path) -> list[str]:
        nodes, metrics = str(files / "nodes.json"), str(files / "metrics.json")
        if self.kind == "floor":
            return [sys.executable, str(HERE / "floor_server.py"), "--port", str(port), *self.options]
        if self.kind == "go":
            assert self.program is not None
            pod_rules = ["-pod-rules"] if self.rules == "pod-dependent" else []
            return [self.program, "-addr", f"127.0.0.1:{port}", "-metrics", metrics, "-nodes", nodes, *pod_rules]
        if self.kind == "lean":
            pod_rules = ["--pod-rules"] if self.rules == "pod-dependent" else []
            return [sys.executable, str(HERE / "lean_server.py"), "--port", str(port), "--metrics", metrics,
                    "--nodes", nodes, *pod_rules]  # fmt: skip
        if self.kind == "baseline":
            assert self.rules is not None
            script = str(HERE / "baseline_server.py")
            return [
                sys.executable,
                script,
                "--port",
                str(port),
                "--nodes",
                nodes,
                "--metrics",
                metrics,
                "--rules",
                self.rules,
            ]
        assert self.rules is not None
        assert self.engine is not None
        shadow = ["--shadow-rules", str(files / f"rules-{self.shadow}")] if self.shadow else []
        cluster = ["--kubeconfig", self.kubeconfig] if self.kubeconfig else ["--nodes", nodes, "--cluster", "off"]
        return [
            sys.executable, "-m", "rulesched", "serve", "--rules", str(files / f"rules-{self.rules}"),
            *cluster, "--metrics", metrics, "--cel-engine", self.engine,
            "--port", str(port), *shadow, *self.options,
        ]  # fmt: skip


def counted(exposition: str, name: str, *labels: str) -> dict[tuple[str, ...], int]:
    """A counter's samples from a server's `/metrics` text (prometheus-client's parser), summed by the values of
    `labels` (a label a sample lacks counts as "")."""
    found: dict[tuple[str, ...], int] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name:
                key = tuple(sample.labels.get(label, "") for label in labels)
                found[key] = found.get(key, 0) + int(sample.value)
    return found


def sizes_of(text: str) -> list[int]:
    """A `--sizes` option: comma-separated candidate counts, each at most 5000."""
    return [min(int(n), 5000) for n in text.split(",") if n.strip()]


def reported(table: str, results: list[JSON], path: Path | None, extra: JSON | None = None) -> int:
    """The table printed and, with `path`, the results written there as JSON (with `extra`'s keys beside
    them); the exit status."""
    print(table)
    if path:
        path.write_bytes(orjson.dumps({"results": results, **(extra or {})}, option=orjson.OPT_INDENT_2))
    return 0


def percentiles(samples: Sequence[float]) -> JSON:
    ordered = sorted(samples)
    if not ordered:
        return {"p50": None, "p99": None}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": at(0.5), "p99": at(0.99)}


def write_inputs(workload: Workload, files: Path) -> None:
    (files / "nodes.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "NodeList", "items": workload.nodes}))
    (files / "metrics.json").write_bytes(orjson.dumps(workload.metrics))
    for name, documents in RULE_SETS.items():
        directory = files / f"rules-{name}"
        directory.mkdir()
        for index, text in enumerate(documents):
            (directory / f"{index}.yaml").write_text(text, encoding="utf-8")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def started(server: Server, files: Path, log: Path | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The server running on a free loopback port; stopped (SIGTERM, then SIGKILL) afterwards. With `log`, its
    output goes there, and the error of a server that does not become ready ends with the log's tail."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with log.open("wb") if log else contextlib.nullcontext(subprocess.DEVNULL) as output:
        argv = server.argv(port, files)
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            try:
                wait_ready(process, port)
            except RuntimeError as error:
                raise RuntimeError(f"{server.name}: {error}{tail(log)}") from None
            yield process, port
        finally:
            stop(process)


def tail(log: Path | None, lines: int = 20) -> str:
    """The last lines of a process's log, to end an error message with (nothing without a log)."""
    if log is None or not log.exists():
        return ""
    last = log.read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- the last {len(last)} lines of its log ---\n" + "\n".join(last) if last else " (its log is empty)"


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a server started by the benchmark: terminate, and kill it if it has not gone in 10 s."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def wait_ready(process: subprocess.Popen[bytes], port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before it was ready")
        with contextlib.suppress(OSError, http.client.HTTPException):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                connection.close()
                return
        time.sleep(0.1)
    raise RuntimeError("server did not become ready in time")


def memory_mb(pid: int) -> dict[str, float]:
    """Resident and peak resident memory of a process, in MB (Linux /proc)."""
    found: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": found.get("VmRSS", 0.0), "peak_rss_mb": found.get("VmHWM", 0.0)}


class Client:
    """One keep-alive connection, as kube-scheduler keeps one per extender."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, path: str, body: bytes) -> tuple[float, bytes]:
        started_at = time.perf_counter()
        self.connection.request("POST", path, body, {"Content-Type": "application/json"})
        response = self.connection.getresponse()
        data = response.read()
        elapsed = (time.perf_counter() - started_at) * 1000
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {data[:300]!r}")
        return elapsed, data

    def close(self) -> None:
        self.connection.close()


def request_body(pod: JSON, nodes: Sequence[JSON], mode: str) -> bytes:
    if mode == "names":
        return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]})
    return orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None})


def one_pod(
    client: Client, pod: JSON, nodes: Sequence[JSON], mode: str, server: Server
) -> tuple[float, float, int, bool]:
    """Filter then prioritize one pod; the latencies, how many passed, and whether that was expected."""
    expected, _ = decide(pod, nodes, server.rules == "pod-dependent")
    filter_ms, answer = client.post("/filter", request_body(pod, nodes, mode))
    result = orjson.loads(answer)
    if mode == "names":
        passed_names = result.get("NodeNames") or []
    else:
        passed_names = [n["metadata"]["name"] for n in (result.get("Nodes") or {}).get("items") or []]
    matches = server.kind == "floor" or passed_names == [n["metadata"]["name"] for n in expected]
    # The floor passes nothing; it is sent the same prioritize request as the others.
    prioritize_ms, _ = client.post("/prioritize", request_body(pod, expected, mode))
    return filter_ms, prioritize_ms, len(expected), matches
