"""Node metrics from metrics-server (`metrics.k8s.io/v1beta1`), polled in a background thread.

Every `interval` seconds the thread (a `cluster/loop.py` loop) lists `/apis/metrics.k8s.io/v1beta1/nodes`
and swaps in the new samples by reference; the request path only reads the latest ones, and a sample older
than `max_age` seconds counts as absent. When the API is missing (404: metrics-server not installed) or failing (503
from the aggregator, connection refused, ...), the problem is logged once per change of state, the old
samples stay until they age out, and polling goes on until metrics-server answers again: scoring
degrades, filtering never breaks.
"""

from __future__ import annotations

import bisect
import datetime
import logging
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client import CustomObjectsApi

from rulesched.cluster.kube.access import read_json
from rulesched.cluster.kube.errors import ApiError, NotFoundError, api_errors
from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, LoopStatus, Outcome
from rulesched.cluster.sources import node_usage
from rulesched.rules.context import NodeUsage, node_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricsStatus:
    """The source's health, for Prometheus and logs."""

    nodes: int
    """Nodes with a sample (fresh or not)."""
    newest_age: float | None
    """Seconds since the newest sample was taken; None without samples."""
    last_poll_ok: bool | None
    """Whether the last poll succeeded; None before the first."""
    last_error: str
    """What the last failed poll said ("" when the last poll succeeded)."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def parse_samples(document: object, received: datetime.datetime) -> dict[str, NodeUsage]:
    """A NodeMetricsList's samples by node name; a sample without a timestamp counts as taken on receipt."""
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list):
        raise ValueError("not a NodeMetricsList (no 'items' list)")
    samples: dict[str, NodeUsage] = {}
    for item in items:
        if isinstance(item, Mapping) and node_name(item):
            sample = node_usage(item)
            if sample.timestamp is None:
                sample = NodeUsage(sample.cpu, sample.memory, received)
            samples[node_name(item)] = sample
    return samples


def describe_failure(error: BaseException) -> str:
    if isinstance(error, NotFoundError):
        return "metrics.k8s.io is not served (404): is metrics-server installed?"
    if isinstance(error, ApiError):
        return error.message
    return f"{type(error).__name__}: {error}"


class MetricsServerSource:
    """A MetricsSource polling metrics-server through the Kubernetes API."""

    def __init__(
        self,
        api: Any,
        *,
        interval: float = 15.0,
        max_age: float = 90.0,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
    ) -> None:
        self._custom = CustomObjectsApi(api)
        self._max_age = max_age
        self._timeout = (connect_timeout, read_timeout)
        self._samples: dict[str, NodeUsage] = {}
        self._expiries: list[float] = []
        """When each sample grows too old (POSIX seconds), sorted: how `generation` sees samples age out."""
        self._polls = 0
        options = LoopOptions(
            "rulesched-metrics",
            interval=interval,
            backoff=Backoff(interval, interval),  # a failed poll is retried at the usual pace
            describe=describe_failure,
            on_change=self._log_change,
            join_timeout=connect_timeout + read_timeout + 1.0,
        )
        self.loop = BackgroundLoop(self._poll, options)

    def usage(self, name: str) -> NodeUsage | None:
        sample = self._samples.get(name)
        if sample is None or sample.timestamp is None:
            return sample
        age = (_now() - sample.timestamp).total_seconds()
        return sample if age <= self._max_age else None

    def generation(self) -> Hashable:
        """Which poll the samples come from, and how many of them have aged out since."""
        polls, expiries = self._polls, self._expiries
        return polls, bisect.bisect_left(expiries, time.time())

    def poll(self) -> bool:
        """Fetch the samples once now (the thread does this every interval); True when it worked.

        Any failure only means "no new samples": the old ones stay until they age out.
        """
        return self.loop.run_once() == "ok"

    def _poll(self) -> Outcome:
        with api_errors():
            response = self._custom.list_cluster_custom_object(
                "metrics.k8s.io", "v1beta1", "nodes", _preload_content=False, _request_timeout=self._timeout
            )
        samples = parse_samples(read_json(response), _now())
        expiries = sorted(s.timestamp.timestamp() + self._max_age for s in samples.values() if s.timestamp)
        # Samples first: a reader that sees the new generation must not find the old samples.
        self._samples, self._expiries = samples, expiries
        self._polls += 1
        return "ok"

    def newest_sample_age(self) -> float | None:
        return self.status().newest_age

    def status(self) -> MetricsStatus:
        samples = self._samples
        stamps = [s.timestamp for s in samples.values() if s.timestamp is not None]
        newest = (_now() - max(stamps)).total_seconds() if stamps else None
        loop = self.loop.status()
        last_ok = None if loop.state == "starting" else loop.state == "ok"
        return MetricsStatus(len(samples), newest, last_ok, loop.last_error)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def _log_change(self, before: LoopStatus, after: LoopStatus) -> None:
        if after.state == "ok":
            state = "is back" if before.state == "failing" else "answers"
            log.info("metrics-server %s: samples for %d nodes", state, len(self._samples))
        else:
            log.warning("metrics-server unavailable (%s): scoring goes on without fresh metrics", after.last_error)
