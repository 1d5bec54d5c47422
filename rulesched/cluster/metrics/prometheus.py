"""Polls the Prometheus queries of the MetricSources (docs/rules/prometheus.md) into `metrics.custom`.

Every query runs in its own `BackgroundLoop` (cluster/loop.py), so the queries of every source run
concurrently, each every `interval`, each bounded by `timeout` (sent to Prometheus too, which then gives
up on its side). A query's answer must be an instant vector; each sample's `nodeLabel` names the node
(for `instance` the port is dropped, and the rest matches a node's name or one of its addresses); NaN and
infinite values are left out. A successful answer replaces the query's values whole; a failure (a 400
for bad PromQL, a 422, a timeout, Prometheus down or starting, a scalar instead of a vector) is recorded
in the query's status and logged once per change of state, and the query's old values stay until they
are older than `maxAge`. A failed query is retried at its usual interval: never a hot loop.

httpx is the client: typed, with per-request timeouts, TLS from an `ssl.SSLContext` (caFile,
certFile/keyFile) and connection reuse; it is this module's alone (tests/test_architecture.py).
"""

from __future__ import annotations

import json
import logging
import math
import ssl
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, LoopStatus, Outcome
from rulesched.cluster.metrics.custom import Answer, CustomValues
from rulesched.cluster.metrics.prometheus_status import (
    QueryStatus as QueryStatus,  # re-exported: its users import it here
)
from rulesched.rules.metricsource import MetricQuery, MetricSource, PrometheusServer

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Largest answer read from Prometheus; a larger one is a query error (aggregate by node)."""
_STOP_WAIT = 0.2
"""Seconds stop() waits for a query thread: a thread mid-request ends on its own and stores nothing."""


class QueryError(Exception):
    """A query that gave no usable values; the message says why, for the status and the log."""


def drop_port(value: str) -> str:
    """`10.0.0.5:9100` → `10.0.0.5`, `node-a:9100` → `node-a`, `[fd00::5]:9100` → `fd00::5`; else as is."""
    if value.startswith("[") and "]" in value:
        return value[1 : value.index("]")]
    host, colon, port = value.rpartition(":")
    if colon and port.isdigit() and host and ":" not in host:
        return host
    return value


@dataclass(frozen=True)
class Reply:
    """What Prometheus answered: the status code, the content type and the body (read up to a bound)."""

    status: int
    content_type: str
    body: bytes


def _json(reply: Reply) -> Any:
    if "json" not in reply.content_type:
        text = reply.body.decode("utf-8", "replace").strip()[:200]
        kind = reply.content_type or "no type"
        raise QueryError(f"Prometheus answered HTTP {reply.status} {text!r} (not JSON: {kind})")
    try:
        return json.loads(reply.body)
    except ValueError as error:
        raise QueryError(f"Prometheus answered HTTP {reply.status} with invalid JSON: {error}") from error


def parse_vector(reply: Reply, node_label: str) -> tuple[dict[str, float], list[str]]:
    """The values by node key of an instant-vector answer, and its warnings; QueryError otherwise."""
    result, warnings = vector_of(reply, "node")
    return _samples(result, node_label), warnings


def vector_of(reply: Reply, per: str) -> tuple[list[Any], list[str]]:
    """The series of an instant-vector answer (one sample `per` node or pod), and its warnings."""
    document = _json(reply)
    if not isinstance(document, Mapping):
        raise QueryError(f"Prometheus answered HTTP {reply.status} with JSON that is not an object")
    if document.get("status") != "success":
        kind, error = document.get("errorType", "unknown"), document.get("error", "")
        raise QueryError(f"Prometheus answered HTTP {reply.status}: {kind}: {error}")
    data = document.get("data") if isinstance(document.get("data"), Mapping) else {}
    assert isinstance(data, Mapping)
    result_type = data.get("resultType")
    if result_type != "vector" or not isinstance(data.get("result"), list):
        raise QueryError(f"the query gives a {result_type}, not an instant vector with one sample per {per}")
    warnings = [str(w) for w in document.get("warnings") or []]
    return data["result"], warnings


def read_reply(response: httpx.Response, deadline: float) -> Reply:
    """The streamed response, its body read up to MAX_ANSWER_BYTES and until `deadline` (time.monotonic();
    httpx's timeout bounds each read, not a body that trickles in)."""
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if time.monotonic() > deadline:
            raise QueryError("no answer in time (the body was still arriving)")
        if len(body) > MAX_ANSWER_BYTES:
            raise QueryError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes: aggregate it further")
    return Reply(response.status_code, response.headers.get("content-type", ""), bytes(body))


def _samples(result: list[Any], node_label: str) -> dict[str, float]:
    values: dict[str, float] = {}
    labelled = 0
    for sample in result:
        metric = sample.get("metric") if isinstance(sample, Mapping) else None
        key = metric.get(node_label) if isinstance(metric, Mapping) else None
        if not isinstance(key, str) or not key:
            continue  # a series without the node label names no node
        labelled += 1
        key = drop_port(key) if node_label == "instance" else key
        if key in values:
            raise QueryError(f"several series for {node_label}={key!r}: aggregate the query by {node_label}")
        value = sample_value(sample.get("value"))
        if value is not None:
            values[key] = value
    if result and not labelled:
        labels = sorted({k for s in result if isinstance(s, Mapping) for k in (s.get("metric") or {})})
        shown = ", ".join(labels) or "none"
        raise QueryError(f"no series has the label {node_label!r} (nodeLabel); their labels: {shown}")
    return values


def sample_value(pair: object) -> float | None:
    """A sample's `[time, "value"]` as a finite number; None for NaN, ±Inf or anything malformed."""
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        return None
    try:
        number = float(pair[1])
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def describe(error: BaseException) -> str:
    """A query failure as one line for the status and the log."""
    if isinstance(error, QueryError):
        return str(error)
    if isinstance(error, httpx.TimeoutException):
        return f"no answer in time ({type(error).__name__})"
    if isinstance(error, httpx.ConnectError):
        return f"cannot connect: {error}"
    if isinstance(error, OSError):
        return f"{type(error).__name__}: {error.strerror or error}"
    return f"{type(error).__name__}: {error}"


def _tls(server: PrometheusServer) -> ssl.SSLContext | bool:
    if not server.url.startswith("https:"):
        return True
    context = ssl.create_default_context(cafile=server.caFile) if server.caFile else ssl.create_default_context()
    if server.insecureSkipVerify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if server.certFile and server.keyFile:
        context.load_cert_chain(server.certFile, server.keyFile)
    return context


class Connection:
    """One MetricSource's Prometheus: a client made at first use (TLS and headers as declared, connections
    reused), and instant queries, each bounded by `timeout` and MAX_ANSWER_BYTES."""

    def __init__(self, server: PrometheusServer) -> None:
        self.server = server
        self._client: httpx.Client | None = None

    def _connect(self) -> httpx.Client:
        if self._client is None:
            server = self.server
            self._client = httpx.Client(
                base_url=server.url,
                timeout=httpx.Timeout(server.timeout),
                verify=_tls(server),
                headers=dict(server.headers),
                trust_env=False,
            )
        return self._client

    def _headers(self) -> dict[str, str]:
        token_file = self.server.bearerTokenFile
        if token_file is None:
            return {}
        # Read on every poll: a projected service account token is rotated in place.
        return {"Authorization": f"Bearer {Path(token_file).read_text(encoding='utf-8').strip()}"}

    def query(self, promql: str) -> Reply:
        """Prometheus' reply to one instant query (any status: the caller parses it)."""
        # Seconds as a bare number: Prometheus reads a float there, but "0.5s" is not a Go-style duration.
        form = {"query": promql, "timeout": f"{self.server.timeout:g}"}
        deadline = time.monotonic() + self.server.timeout
        with self._connect().stream("POST", "/api/v1/query", data=form, headers=self._headers()) as response:
            return read_reply(response, deadline)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class Poller:
    """What every poller of a MetricSource shares: its thread (retried at the usual pace when it fails), its
    connection, its failures and warnings, and its status under `name`; `_poll` and `_log_change` are its own."""

    def __init__(self, source: str, server: PrometheusServer, name: str) -> None:
        self.source, self.server, self.name = source, server, name
        self._connection = Connection(server)
        self.polls = self.failures = self.nodes = 0
        self.warnings: tuple[str, ...] = ()
        self.last_error = ""
        self.last_error_at: float | None = None
        options = LoopOptions(
            f"rulesched-prometheus-{name}",
            interval=server.interval,
            backoff=Backoff(server.interval, server.interval),  # a failed query is retried at the usual pace
            describe=self._failed,
            on_change=self._log_change,
            join_timeout=_STOP_WAIT,
        )
        self.loop = BackgroundLoop(self._poll, options)

    FOUND = "values for %d nodes"
    """What the log says a poll found (`nodes`)."""
    MEANWHILE = "its values age out after %gs"
    """What the log says happens while the polls fail (`maxAge`)."""

    def _poll(self) -> Outcome:
        raise NotImplementedError

    def _log_change(self, before: LoopStatus, after: LoopStatus) -> None:
        where = f"{self.source}/{self.name} ({self.server.url})"
        if after.state == "ok":
            state = "recovered" if before.state == "failing" else "answers"
            log.info(f"Prometheus query %s %s: {self.FOUND}", where, state, self.nodes)
        else:
            log.warning(
                f"Prometheus query %s failing (%s): {self.MEANWHILE}", where, after.last_error, self.server.maxAge
            )

    def _warn(self, warnings: list[str]) -> None:
        if warnings and warnings != list(self.warnings):
            log.warning("Prometheus warns about %s/%s: %s", self.source, self.name, "; ".join(warnings))
        self.warnings = tuple(warnings)

    def _failed(self, error: BaseException) -> str:
        self.failures += 1
        self.last_error, self.last_error_at = describe(error), time.time()
        return self.last_error

    def status(self) -> QueryStatus:
        loop = self.loop.status()
        return QueryStatus(
            self.source,
            self.name,
            self.server.url,
            loop.state,
            loop.last_success,
            self.last_error,
            self.last_error_at,
            self.nodes,
            self.polls,
            self.failures,
            self.warnings,
        )

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
        if not self.loop.status().running:
            self._connection.close()


class QueryPoller(Poller):
    """One query of one MetricSource, polled in its own thread into `values`."""

    def __init__(self, source: str, server: PrometheusServer, query: MetricQuery, values: CustomValues) -> None:
        self.query = query
        self._values = values
        super().__init__(source, server, query.name)

    def _poll(self) -> Outcome:
        self.polls += 1
        reply = self._connection.query(self.query.query)
        values, warnings = parse_vector(reply, self.query.nodeLabel)
        if self.loop.stopping:
            return "ok"  # replaced by a MetricSource change meanwhile: its values are no longer wanted
        self._values.update(self.query.name, Answer(values, time.time(), self.server.maxAge))
        self.nodes = len(values)
        self._warn(warnings)
        return "ok"


def _key(source: str, server: PrometheusServer, query: MetricQuery) -> str:
    """What identifies a poller: a MetricSource change that leaves it the same keeps it running."""
    return json.dumps([source, server.model_dump(), query.model_dump()], sort_keys=True)


class PodUsagePolls(Protocol):
    """`podUsage` polled into the usage store (`prometheus_pods.PodUsageFeed`: a protocol, as that module
    builds on this one)."""

    def configure(self, sources: Sequence[MetricSource]) -> None: ...

    def status(self) -> list[QueryStatus]: ...

    def poll(self) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class PrometheusPollers:
    """The pollers of the rule book's MetricSources: `configure` with each new book's sources."""

    def __init__(self, values: CustomValues) -> None:
        self.values = values
        self._pollers: dict[str, QueryPoller] = {}
        self._started = False
        self._lock = threading.Lock()
        self.pod_usage: PodUsagePolls | None = None  # `podUsage` into the usage store, when estimates use it

    def configure(self, sources: Sequence[MetricSource]) -> None:
        """Poll exactly these sources' queries: new ones start, removed or changed ones stop."""
        wanted = {_key(s.metadata.name, s.spec.prometheus, q): (s, q) for s in sources for q in s.spec.queries}
        with self._lock:
            gone = {key: poller for key, poller in self._pollers.items() if key not in wanted}
        _stop_all(list(gone.values()))  # before their values go: a stopped poller stores nothing more
        with self._lock:  # one swap: the status never shows the queries half changed (or none)
            for key in gone:
                self._pollers.pop(key, None)
            for key, (source, query) in wanted.items():
                if key not in self._pollers:
                    poller = QueryPoller(source.metadata.name, source.spec.prometheus, query, self.values)
                    self._pollers[key] = poller
                    if self._started:
                        poller.start()
            self.values.forget(p.query.name for p in self._pollers.values())
        log.debug("Prometheus queries: %s", ", ".join(p.query.name for p in self.pollers()) or "none")
        if self.pod_usage is not None:
            self.pod_usage.configure(sources)

    def pollers(self) -> list[QueryPoller]:
        with self._lock:
            return sorted(self._pollers.values(), key=lambda p: (p.source, p.query.name))

    def status(self) -> list[QueryStatus]:
        return [p.status() for p in self.pollers()] + (self.pod_usage.status() if self.pod_usage else [])

    def poll(self) -> None:
        """Run every query once now, in this thread (tests and tools; the threads do it every interval)."""
        for poller in self.pollers():
            poller.loop.run_once()
        if self.pod_usage is not None:
            self.pod_usage.poll()

    def start(self) -> None:
        with self._lock:
            self._started = True
            pollers = list(self._pollers.values())
        for poller in pollers:
            poller.start()
        if self.pod_usage is not None:
            self.pod_usage.start()

    def stop(self) -> None:
        with self._lock:
            self._started = False
            pollers = list(self._pollers.values())
        _stop_all(pollers)
        if self.pod_usage is not None:
            self.pod_usage.stop()


def _stop_all(pollers: Iterable[QueryPoller]) -> None:
    for poller in pollers:
        poller.stop()
