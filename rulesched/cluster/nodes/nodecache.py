"""The node cache: every Node of the cluster, kept current by list-then-watch in a background thread.

The thread lists the nodes (in pages), then watches from the list's resourceVersion with bookmarks, and
watches again from the last resourceVersion whenever a watch ends. A watch too old for the API server
("410 GoneError", an ERROR event with code 410) is answered by a new list whose result replaces the cache in
one reference swap, so a reader never sees a node disappear that still exists. Connection loss and other
errors are retried with capped exponential backoff (`cluster/loop.py`) while readers keep the last known
nodes. Nodes are stored as the plain JSON dicts the API sent (camelCase keys, no client model objects), and `get` is a
dict lookup that never blocks; only `fetch` (one direct GET, bounded in time) may.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes.client import CoreV1Api

from rulesched.cluster.changelog import ChangeLog
from rulesched.cluster.kube.access import discard, interrupt, read_json
from rulesched.cluster.kube.errors import ApiError, GoneError, NotFoundError, api_errors
from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, LoopStatus, Outcome
from rulesched.cluster.nodes.unknown_nodes import NegativeCache
from rulesched.cluster.sources import NamedNodes, without_managed_fields
from rulesched.rules.context import node_name

log = logging.getLogger(__name__)

Node = Mapping[str, Any]
T = TypeVar("T")

_HEALTHY_WATCH_SECONDS = 1.0
"""A watch that ends sooner than this with no event is retried after a backoff pause, not at once."""
_MAX_DELETED = 10_000
"""Names of deleted nodes remembered (so a late fetch cannot resurrect one) until the next list."""


class WatchExpiredError(Exception):
    """The resourceVersion being watched is too old for the API server (410 GoneError): relist."""


class WatchFailedError(Exception):
    """The API server ended a watch with an ERROR event other than 410 (e.g. 500, 504)."""


@dataclass(frozen=True)
class NodeCacheStatus:
    """What the cache can tell about itself (for /readyz, logs and Prometheus)."""

    ready: bool
    """The first list has completed."""
    nodes: int
    resource_version: str
    """Where the next watch starts (the last event's or bookmark's resourceVersion)."""
    relists: int
    """Lists completed: 1 after the first, one more after each 410 GoneError."""
    failing: bool
    """The last request to the API failed (an outage is under way)."""
    last_error: str
    """What the failure under way says ("" when the API answers)."""


def watch_lines(response: Any) -> Iterator[bytes]:
    """The lines of a watch stream as they arrive; an event may span HTTP chunks, so split on newlines."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


@dataclass(frozen=True)
class NodeCacheOptions:
    """How a node cache talks to the API: its timeouts (seconds), list page size, retry backoff, and its
    negative cache of names the API did not return."""

    fetch_timeout: float = 2.0
    watch_timeout: int = 240
    page_size: int = 500
    connect_timeout: float = 5.0
    list_timeout: float = 60.0
    backoff_initial: float = 0.2
    backoff_max: float = 10.0
    unknown_ttl: float = 5.0
    unknown_kept: int = 10_000


class NodeCache(NamedNodes):
    """A NodeSource backed by the Kubernetes API: list, then watch, in one daemon thread.

    The list and watch calls go through `_call` and each watch event through `_event`, so that the pod
    and namespace caches (`pods/podcache.py`) reuse this loop over their own kinds."""

    what = "nodes"

    def __init__(self, api: Any, options: NodeCacheOptions | None = None) -> None:
        options = options or NodeCacheOptions()
        self._core = CoreV1Api(api)
        self._fetch_timeout = options.fetch_timeout
        self._watch_timeout = options.watch_timeout
        self._page_size = options.page_size
        self._connect_timeout = options.connect_timeout
        self._list_timeout = options.list_timeout
        self._nodes: dict[str, Node] = {}
        self._deleted: set[str] = set()
        self._changes = ChangeLog()
        self._lock = threading.Lock()
        self._rv = ""
        self._synced = threading.Event()
        self._response: Any = None
        self._relists = 0
        self._backoff = Backoff(options.backoff_initial, options.backoff_max)
        self._unknown = NegativeCache(options.unknown_ttl, options.unknown_kept)
        self._fetch_failures = 0
        """Direct GETs failed in a row: each pauses every lookup for the cache's backoff delay after as many."""
        loop_options = LoopOptions(
            "rulesched-node-cache",
            backoff=self._backoff,
            describe=_describe,
            on_change=self._log_change,
            interrupt=self._interrupt,
            join_timeout=options.connect_timeout + 1.0,
        )
        self.loop = BackgroundLoop(self._round, loop_options)

    # -- NodeSource -------------------------------------------------------------------------------------

    def get(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def fetch(self, name: str) -> Node | None:
        """One direct GET of the node, bounded by fetch_timeout; the node found joins the cache.

        A name the API did not return is not asked again for `unknown_ttl` seconds (negative cache); when
        the API failed, for the cache's current backoff delay if that is longer, and no other name is
        asked either until then: during an outage, requests make no GETs the watch would not make."""
        if self._unknown.holds(name):
            return None
        try:
            with api_errors():
                response = self._core.read_node(name, _preload_content=False, _request_timeout=self._fetch_timeout)
            node = read_json(response)
        except Exception as error:  # connection refused, timeout, malformed body: the caller treats it as unknown
            if isinstance(error, NotFoundError):
                self._unknown.add(name)
                return None
            # During an outage the watch has already said so; one line per request would drown it.
            level = logging.DEBUG if self.loop.status().state == "failing" else logging.WARNING
            log.log(level, "direct GET of node %s failed: %s", name, _describe(error))
            self._fetch_failures += 1
            self._unknown.pause(self._backoff.delay(self._fetch_failures))
            return None
        self._fetch_failures = 0
        if not isinstance(node, dict) or node_name(node) != name:
            self._unknown.add(name)
            return None
        node = without_managed_fields(node)
        with self._lock:
            # A node deleted since the GET was sent must not come back as a ghost; the watch has the last word.
            if name not in self._nodes and name not in self._deleted:
                self._nodes[name] = node
                self._changes.record(name)
        return node

    def ready(self) -> bool:
        return self._synced.is_set()

    def size(self) -> int:
        return len(self._nodes)

    def generation(self) -> int:
        return self._changes.generation()

    def changed_since(self, generation: int) -> set[str] | None:
        return self._changes.since(generation)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def _interrupt(self) -> None:
        response = self._response
        if response is not None:
            interrupt(response)

    # -- extras -----------------------------------------------------------------------------------------

    def wait_ready(self, timeout: float) -> bool:
        """Block up to `timeout` seconds for the first list; True once it has completed."""
        return self._synced.wait(timeout)

    def status(self) -> NodeCacheStatus:
        loop = self.loop.status()
        return NodeCacheStatus(
            ready=self.ready(),
            nodes=self.size(),
            resource_version=self._rv,
            relists=self._relists,
            failing=loop.state == "failing",
            last_error=loop.last_error,
        )

    # -- the background thread --------------------------------------------------------------------------

    def _round(self) -> Outcome:
        """One list (when needed) and one watch; "retry" (relist at once) when the watch expired."""
        try:
            if not self._rv:
                self._relist()
            return self._watch()
        except WatchExpiredError as error:
            log.info("node watch expired (%s): relisting", error)
            self._rv = ""
            return "retry"

    def _relist(self) -> None:
        nodes, rv = self._list_all()
        with self._lock:
            self._nodes = nodes  # one reference swap: readers see the old or the new view, never a mix
            self._deleted = set()
            self._rv = rv
            self._changes.record(None)
        self._relists += 1
        self.loop.succeeded()
        if not self._synced.is_set():
            log.info("node cache synced: %d nodes at resourceVersion %s", len(nodes), rv)
        else:
            log.info("node cache relisted: %d nodes at resourceVersion %s", len(nodes), rv)
        self._synced.set()

    def _list_all(self) -> tuple[dict[str, Node], str]:
        nodes: dict[str, Node] = {}
        token: str | None = None
        while True:
            page = self._list_page(token)
            for item in page.get("items") or []:
                if isinstance(item, dict) and node_name(item):
                    nodes[node_name(item)] = without_managed_fields(item)
            metadata = page.get("metadata") or {}
            token = metadata.get("continue") or None
            if token is None:
                return nodes, str(metadata.get("resourceVersion") or "")

    def _call(self, **kwargs: Any) -> Any:
        """List (or, with `watch=True`, watch) the objects this cache keeps."""
        return self._core.list_node(**kwargs)

    def _list_page(self, token: str | None) -> Mapping[str, Any]:
        with api_errors():
            response = self._call(
                limit=self._page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=(self._connect_timeout, self._list_timeout),
            )
        page: object = self._track(response, read_json)
        if not isinstance(page, dict):
            raise ValueError(f"the {self.what} list is not a JSON object")
        return page

    def _watch(self) -> Outcome:
        started = time.monotonic()
        try:
            with api_errors():
                response = self._call(
                    watch=True,
                    resource_version=self._rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=self._watch_timeout,
                    _preload_content=False,
                    # The server ends the watch after timeout_seconds; a read timeout a bit later catches a dead peer.
                    _request_timeout=(self._connect_timeout, self._watch_timeout + 30),
                )
        except GoneError as error:  # servers without a watch cache may refuse the watch itself
            raise WatchExpiredError(error.message) from error
        self.loop.succeeded()  # connected: the API answers again
        events = self._track(response, self._consume) or 0
        quick = time.monotonic() - started < _HEALTHY_WATCH_SECONDS
        return "short" if events == 0 and quick else "ok"

    def _track(self, response: Any, read: Callable[[Any], T]) -> T | None:
        """Read `response` with `read`, where stop() can interrupt it."""
        self._response = response
        try:
            if self.loop.stopping:
                return None
            return read(response)
        finally:
            self._response = None
            discard(response)

    def _consume(self, response: Any) -> int:
        events = 0
        for line in watch_lines(response):
            if self.loop.stopping:
                break
            self._apply(json.loads(line))
            events += 1
        return events

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise WatchFailedError(f"watch event {kind!r} without an object")
        if kind == "ERROR":
            raise _watch_error(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self._lock:
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self._event(str(kind), obj)
            if rv:
                self._rv = rv  # BOOKMARKs carry only this: where to resume

    def _event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """An ADDED, MODIFIED or DELETED object from the watch, under the lock."""
        name = node_name(obj)
        if not name:
            return
        if kind == "DELETED":
            self._nodes.pop(name, None)
            self._changes.record(name)
            if len(self._deleted) >= _MAX_DELETED:
                self._deleted.clear()
            self._deleted.add(name)
        else:
            self._nodes[name] = without_managed_fields(obj)
            self._deleted.discard(name)
            self._changes.record(name)

    def _log_change(self, before: LoopStatus, after: LoopStatus) -> None:
        if after.state == "failing":
            log.warning("node cache: Kubernetes API failing (%s); serving the last known nodes", after.last_error)
        elif before.state == "failing":
            self._fetch_failures = 0
            self._unknown.resume()
            log.info("node cache: Kubernetes API reachable again (%d nodes)", self.size())


def _watch_error(status: Mapping[str, Any]) -> Exception:
    code = status.get("code")
    message = str(status.get("message") or status.get("reason") or "unknown error")
    if code == 410:
        return WatchExpiredError(message)
    return WatchFailedError(f"watch error {code}: {message}")


def _describe(error: BaseException) -> str:
    if isinstance(error, ApiError):
        return error.message
    return f"{type(error).__name__}: {error}"
