"""A small Kubernetes API server on loopback, speaking to the real `kubernetes` client as kube-apiserver v1.32 does.

Its answers are built from the recorded responses in `tests/fixtures/kube-apiserver-v1.32`: the node
list (paged with `limit`/`continue`), watch streams with chunked framing (events split across chunks,
BOOKMARKs, the 410 ERROR event of an expired resourceVersion), a node GET and its 404, 401 for a bad token,
metrics.k8s.io (200, 404 when metrics-server is absent, 503 when it is down) and pods/binding (201 and the
refusals). A pod or namespace GET answers the object or its 404, and a (resource, verb) the test forbids a 403.
Pods and namespaces are served from `tests/fixtures/kube-apiserver-v1.32-pods`: lists with field
selectors (`spec.nodeName!=`, `status.phase!=…`), and watches that, as the watch cache does, send an object
entering the selection as ADDED and one leaving it as DELETED with its last matching content.
The test changes its state through methods: nodes and pods added, labelled, bound and deleted (watch
events with increasing resourceVersions), watches expired, the whole server "down" (every connection dropped).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime
import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rulesched.cluster.kube.access import KubeAccess, KubeEnvironment, connect, find_config
from rulesched.cluster.nodes.nodecache import NodeCache, NodeCacheOptions
from tests.kubewrites import ROUTES as WRITE_ROUTES
from tests.kubewrites import Writes
from tests.paths import APISERVER_FIXTURES, POD_FIXTURES

TOKEN = "test-token"
_TICK = 0.02
"""Seconds a waiting watch sleeps between looks at the state."""
_MAX_WATCH_SECONDS = 30
_MAX_STALL_SECONDS = 10.0


def fixture(name: str) -> Any:
    return json.loads((APISERVER_FIXTURES / name).read_text())


def _recorded(name: str, **names: str) -> dict[str, Any]:
    """A recorded binding answer, with the recorded pod and node names replaced by these."""
    text = (POD_FIXTURES / name).read_text()
    for recorded, actual in names.items():
        text = text.replace(recorded, actual)
    answer: dict[str, Any] = json.loads(text)
    return answer


def pod_fixture(name: str) -> Any:
    """A recorded pods/namespaces answer (the first line of a watch stream)."""
    text = (POD_FIXTURES / name).read_text()
    return json.loads(text.splitlines()[0] if name.endswith(".ndjson") else text)


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    status.update(message=message, reason=reason)
    if details is not None:
        status["details"] = details
    status["code"] = code
    return status


def _compact(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode() + b"\n"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Pod:
    """A pod the server knows, for pods/binding: its uid and the node it is bound to ("" when pending)."""

    uid: str
    node: str = ""


@dataclass
class _Event:
    rv: int
    kind: str
    obj: dict[str, Any]
    before: dict[str, Any] | None = None
    """Pods: the object before the change (None when it is new), for field-selector transitions."""


@dataclass
class _State:
    """Everything the server knows; guarded by `KubeAPI.cond`."""

    nodes: dict[str, dict[str, Any]]
    rv: int
    events: list[_Event] = field(default_factory=list)
    compacted: int = 0
    expiries: int = 0
    bookmarks: int = 0
    down: bool = False
    closing: bool = False
    list_errors: list[int] = field(default_factory=list)
    snapshots: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    stall_gets: float = 0.0
    metrics_status: int = 200
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_usage: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    pod_metrics_chunked: bool = True
    pods: dict[tuple[str, str], Pod] = field(default_factory=dict)
    bind_forbidden: bool = False
    requests: list[str] = field(default_factory=list)
    bindings: list[dict[str, Any]] = field(default_factory=list)
    pod_objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pod_events: list[_Event] = field(default_factory=list)
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    namespace_events: list[_Event] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)
    patch_errors: list[int] = field(default_factory=list)
    patch_forbidden: bool = False
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    """(resource, verb) pairs answered 403 (`("pods", "list")`), as for credentials without that permission."""


def _initial_usage() -> dict[str, dict[str, Any]]:
    items = fixture("m1-metrics-nodes-list.json")["items"]
    return {i["metadata"]["name"]: {"usage": i["usage"], "timestamp": None} for i in items}


class KubeAPI:
    """The fake API server: `url` to connect to, methods to change what it serves."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        listed = fixture("a1-nodes-list.json")
        nodes = {n["metadata"]["name"]: n for n in listed["items"]}
        self.cond = threading.Condition()
        self.state = _State(nodes=nodes, rv=int(listed["metadata"]["resourceVersion"]), usage=_initial_usage())
        self._template = copy.deepcopy(nodes["node-a"])
        for pod in pod_fixture("p4-pods-list-assigned-nonterminal.json")["items"]:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            self.state.pod_objects[key] = pod
            self.state.pods[key] = Pod(pod["metadata"]["uid"], pod["spec"].get("nodeName", ""))
        for namespace in pod_fixture("n1-namespaces-list.json")["items"]:
            self.state.namespaces[namespace["metadata"]["name"]] = namespace
        first = pod_fixture("w2-pods-watch-assigned.ndjson")["object"]
        self._pod_template = {k: copy.deepcopy(first[k]) for k in ("metadata", "spec")}
        self._pod_template["spec"].pop("nodeName")
        self._pod_template["metadata"].pop("managedFields")
        self.writes = Writes()
        """Leases, evictions and events (`tests/kubewrites.py`)."""
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self.cond:
            self.state.closing = True
            self.cond.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def kubeconfig(self, path: Path, token: str = TOKEN) -> Path:
        return write_kubeconfig(path, self.url, token)

    # -- changing the nodes -----------------------------------------------------------------------------

    def _change(self, kind: str, node: dict[str, Any], *, silent: bool = False) -> int:
        """Record one change at the next resourceVersion; `silent` leaves it out of the watch history."""
        with self.cond:
            self.state.rv += 1
            node["metadata"]["resourceVersion"] = str(self.state.rv)
            name = node["metadata"]["name"]
            if kind == "DELETED":
                self.state.nodes.pop(name, None)
            else:
                self.state.nodes[name] = node
            if not silent:
                watched = {"kind": "Node", "apiVersion": "v1", **copy.deepcopy(node)}
                self.state.events.append(_Event(self.state.rv, kind, watched))
            self.cond.notify_all()
            return self.state.rv

    def add_node(self, name: str, labels: dict[str, str] | None = None, *, silent: bool = False) -> int:
        node = copy.deepcopy(self._template)
        node["metadata"].update(name=name, uid=f"uid-{name}", labels={"kubernetes.io/hostname": name, **(labels or {})})
        node["metadata"].pop("annotations", None)
        return self._change("ADDED", node, silent=silent)

    def label_node(self, name: str, key: str, value: str) -> int:
        with self.cond:
            node = copy.deepcopy(self.state.nodes[name])
        node["metadata"].setdefault("labels", {})[key] = value
        return self._change("MODIFIED", node)

    def delete_node(self, name: str, *, silent: bool = False) -> int:
        with self.cond:
            node = copy.deepcopy(self.state.nodes[name])
        return self._change("DELETED", node, silent=silent)

    def node_names(self) -> set[str]:
        with self.cond:
            return set(self.state.nodes)

    def bump(self) -> int:
        """Another resource changed: the global resourceVersion moves, no node event."""
        with self.cond:
            self.state.rv += 1
            return self.state.rv

    def bookmark(self) -> int:
        """Send a BOOKMARK at the current resourceVersion on every open watch that allows them."""
        with self.cond:
            self.state.bookmarks += 1
            self.cond.notify_all()
            return self.state.rv

    def expire(self, changes: Callable[[], object] = lambda: None) -> None:
        """Compact history: apply `changes` (use silent ones), then every watch older than now gets 410 Gone."""
        changes()
        with self.cond:
            self.state.compacted = self.state.rv + 1
            self.state.events.clear()
            self.state.expiries += 1
            self.cond.notify_all()

    def fail_lists(self, *statuses: int) -> None:
        """The next lists answer these HTTP statuses (410 as an expired list, c3), one each."""
        with self.cond:
            self.state.list_errors.extend(statuses)

    def go_down(self) -> None:
        """Drop every connection: open watches are cut, new requests get no answer."""
        with self.cond:
            self.state.down = True
            self.cond.notify_all()

    def come_back(self) -> None:
        with self.cond:
            self.state.down = False

    def stall_gets(self, seconds: float) -> None:
        """Node GETs answer only after `seconds` (a slow API server)."""
        with self.cond:
            self.state.stall_gets = seconds

    def requests(self, prefix: str = "") -> list[str]:
        with self.cond:
            return [r for r in self.state.requests if r.startswith(prefix)]

    # -- metrics and pods -------------------------------------------------------------------------------

    def set_metrics_status(self, status: int) -> None:
        """200 serves the samples, 404 is metrics-server not installed, 503 is metrics-server down."""
        with self.cond:
            self.state.metrics_status = status

    def set_usage(self, name: str, cpu: str, memory: str, age: float | None = None) -> None:
        """The node's sample; taken `age` seconds ago (None: at each request, as a live metrics-server)."""
        stamp = None
        if age is not None:
            then = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=age)
            stamp = then.strftime("%Y-%m-%dT%H:%M:%SZ")
        with self.cond:
            self.state.usage[name] = {"usage": {"cpu": cpu, "memory": memory}, "timestamp": stamp}

    def frame_pod_metrics(self, *, chunked: bool) -> None:
        """Send the PodMetricsList chunked, as the API server sends lists (the default), or whole with its
        Content-Length."""
        with self.cond:
            self.state.pod_metrics_chunked = chunked

    def set_pod_usage(self, namespace: str, name: str, cpu: str, memory: str) -> None:
        """The pod's usage in `pods.metrics.k8s.io` (one container, `app`), sampled at each request."""
        with self.cond:
            self.state.pod_usage[(namespace, name)] = {"cpu": cpu, "memory": memory}

    def add_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str = "",
        *,
        labels: dict[str, str] | None = None,
        cpu: str = "100m",
    ) -> int:
        """A new pod (bound to `node` at creation when given), with one container requesting `cpu`."""
        pod = copy.deepcopy(self._pod_template)
        pod["metadata"].update(name=name, namespace=namespace, uid=uid, labels=labels or {"app": name})
        pod["metadata"]["creationTimestamp"] = _now()
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        if node:
            pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
        with self.cond:
            self.state.pods[(namespace, name)] = Pod(uid, node)
        return self._pod_change("ADDED", pod)

    def pod_object(self, namespace: str, name: str) -> dict[str, Any]:
        with self.cond:
            return copy.deepcopy(self.state.pod_objects[(namespace, name)])

    def _pod_change(self, kind: str, pod: dict[str, Any]) -> int:
        """Record one pod change at the next resourceVersion (the lock may be held)."""
        with self.cond:
            self.state.rv += 1
            pod["metadata"]["resourceVersion"] = str(self.state.rv)
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            before = self.state.pod_objects.get(key)
            if kind == "DELETED":
                self.state.pod_objects.pop(key, None)
            else:
                self.state.pod_objects[key] = pod
            watched = {"kind": "Pod", "apiVersion": "v1", **copy.deepcopy(pod)}
            self.state.pod_events.append(_Event(self.state.rv, kind, watched, before))
            self.cond.notify_all()
            return self.state.rv

    def update_pod(self, pod: dict[str, Any]) -> int:
        """A change to a pod's object (its owners, annotations, creation time), as a MODIFIED watch event."""
        return self._pod_change("MODIFIED", copy.deepcopy(pod))

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> int:
        """A status change, as the kubelet (here: the test) writes it."""
        pod = self.pod_object(namespace, name)
        pod["status"]["phase"] = phase
        return self._pod_change("MODIFIED", pod)

    def delete_pod(self, namespace: str, name: str) -> int:
        """A deletion as kube-apiserver sends it without a kubelet: MODIFIED with a deletionTimestamp, then DELETED."""
        pod = self.pod_object(namespace, name)
        pod["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
        self._pod_change("MODIFIED", pod)
        return self._pod_change("DELETED", copy.deepcopy(pod))

    def label_namespace(self, name: str, key: str, value: str) -> int:
        with self.cond:
            namespace = copy.deepcopy(self.state.namespaces[name])
            namespace["metadata"].setdefault("labels", {})[key] = value
            self.state.rv += 1
            namespace["metadata"]["resourceVersion"] = str(self.state.rv)
            self.state.namespaces[name] = namespace
            watched = {"kind": "Namespace", "apiVersion": "v1", **copy.deepcopy(namespace)}
            self.state.namespace_events.append(_Event(self.state.rv, "MODIFIED", watched))
            self.cond.notify_all()
            return self.state.rv

    def pod(self, namespace: str, name: str) -> Pod:
        with self.cond:
            return self.state.pods[(namespace, name)]

    def bind(self, namespace: str, name: str, node: str) -> int:
        """The pod bound to `node`, as kube-scheduler's Binding does (a MODIFIED event with spec.nodeName)."""
        pod = self.pod_object(namespace, name)
        pod["spec"]["nodeName"] = node
        with self.cond:
            self.state.pods[(namespace, name)].node = node
        return self._pod_change("MODIFIED", pod)

    def pod_writes(self, namespace: str, name: str) -> int:
        """How many changes of the pod the server recorded (each a watch event with a new resourceVersion)."""
        with self.cond:
            return sum(
                1
                for e in self.state.pod_events
                if (e.obj["metadata"]["namespace"], e.obj["metadata"]["name"]) == (namespace, name)
            )

    def patches(self) -> list[dict[str, Any]]:
        """Every PATCH of a pod received: `path`, `contentType`, `body`, `code` (the answer's status)."""
        with self.cond:
            return copy.deepcopy(self.state.patches)

    def fail_patches(self, *statuses: int) -> None:
        """The next pod patches answer these statuses (403, 404, 409, 429, 500), one each."""
        with self.cond:
            self.state.patch_errors.extend(statuses)

    def forbid_patches(self, forbidden: bool = True) -> None:
        """Every pod patch is refused with 403, as without the requeue overlay's RBAC."""
        with self.cond:
            self.state.patch_forbidden = forbidden

    def forbid_binding(self, forbidden: bool = True) -> None:
        with self.cond:
            self.state.bind_forbidden = forbidden

    def bindings(self) -> list[dict[str, Any]]:
        with self.cond:
            return list(self.state.bindings)

    def put_pod(self, pod: dict[str, Any]) -> int:
        """A pod object as the test has it (a recorded one, say), created as it is."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        with self.cond:
            self.state.pods[key] = Pod(pod["metadata"]["uid"], pod["spec"].get("nodeName", ""))
        return self._pod_change("ADDED", copy.deepcopy(pod))

    def forbid(self, resource: str, verb: str) -> None:
        """Answer 403 to `verb` (list, get) on `resource` (pods, namespaces) from now on."""
        with self.cond:
            self.state.forbidden.add((resource, verb))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler], api: KubeAPI) -> None:
        self.api = api
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a client that went away is not an error
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection ends its thread
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    @property
    def api(self) -> KubeAPI:
        return self.server.api

    @property
    def state(self) -> _State:
        return self.server.api.state

    def _dispatch(self, method: str) -> None:
        with self.api.cond:
            self.state.requests.append(f"{method} {self.path}")
            down = self.state.down
        if down:
            self._drop()
            return
        if not self._authorized():
            self._json(401, fixture("d2-nodes-list-bad-token-401.json"))
            return
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        for pattern, handler in _ROUTES:
            captured = _match(pattern, method, parts)
            if captured is not None:
                handler(self, query, *captured)
                return
        self._json(404, _status(404, "NotFound", "the server could not find the requested resource", {}))

    def _authorized(self) -> bool:
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        return scheme.lower() == "bearer" and token.strip() == TOKEN

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError, ValueError):  # the client went away
            self.connection.shutdown(socket.SHUT_RDWR)

    # -- writing ----------------------------------------------------------------------------------------

    def _json(self, code: int, document: Any) -> None:
        self._body(code, _compact(document), "application/json")

    def _body(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _start_chunked(self) -> None:
        self.send_response(200)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _chunked(self, body: bytes) -> None:
        """A body sent as kube-apiserver sends lists: chunked, here in two chunks."""
        self._start_chunked()
        middle = len(body) // 2
        self._chunk(body[:middle])
        self._chunk(body[middle:])
        self._chunk(b"")

    # -- nodes ------------------------------------------------------------------------------------------

    def list_nodes(self, query: dict[str, str]) -> None:
        if query.get("watch") in ("true", "1", "True"):
            self.watch_nodes(query)
            return
        with self.api.cond:
            error = self.state.list_errors.pop(0) if self.state.list_errors else None
            page = None if error else self._page(query)
        if error == 410:
            self._json(410, fixture("c3-list-exact-rv-after-compaction-410.json"))
        elif error is not None:
            self._json(error, _status(error, "InternalError", f"injected error {error}"))
        elif page is None:
            self._json(410, fixture("c2-list-continue-after-compaction-410.json"))
        else:
            self._chunked(_compact(page))

    def _page(self, query: dict[str, str]) -> dict[str, Any] | None:
        """One page of a consistent list: later pages come from the snapshot of the first."""
        limit = int(query.get("limit") or 0) or 1_000_000
        if "continue" in query:
            token = json.loads(base64.urlsafe_b64decode(query["continue"] + "=="))
            rv, start = int(token["rv"]), str(token["start"])
            if rv not in self.state.snapshots:
                return None
            items = [n for n in self.state.snapshots[rv] if n["metadata"]["name"] > start]
        else:
            rv = self.state.rv
            items = [copy.deepcopy(self.state.nodes[k]) for k in sorted(self.state.nodes)]
            self.state.snapshots[rv] = items
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if len(items) > limit:
            last = items[limit - 1]["metadata"]["name"]
            raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": last}).encode()
            metadata["continue"] = base64.urlsafe_b64encode(raw).decode().rstrip("=")
            metadata["remainingItemCount"] = len(items) - limit
        return {"kind": "NodeList", "apiVersion": "v1", "metadata": metadata, "items": items[:limit]}

    def get_node(self, query: dict[str, str], name: str) -> None:
        with self.api.cond:
            stall = self.state.stall_gets
        deadline = time.monotonic() + min(stall, _MAX_STALL_SECONDS)
        while time.monotonic() < deadline and not self.state.closing:
            time.sleep(_TICK)
        with self.api.cond:
            node = copy.deepcopy(self.state.nodes.get(name))
        if node is None:
            missing = (APISERVER_FIXTURES / "d1-node-get-missing-404.json").read_text().replace("node-zz", name)
            self._json(404, json.loads(missing))
        else:
            self._chunked(_compact({"kind": "Node", "apiVersion": "v1", **node}))

    def watch_nodes(self, query: dict[str, str]) -> None:
        with self.api.cond:
            start = int(query.get("resourceVersion") or self.state.rv)
            expiries, bookmarks = self.state.expiries, self.state.bookmarks
            expired = start < self.state.compacted
        timeout = min(int(query.get("timeoutSeconds") or _MAX_WATCH_SECONDS), _MAX_WATCH_SECONDS)
        stream = _WatchStream(self, start, expiries, bookmarks, query.get("allowWatchBookmarks") == "true")
        with contextlib.suppress(OSError, ValueError):  # the client went away
            self._start_chunked()
            if expired:  # a too-old watch is not an HTTP 410: a 200, one ERROR event, the end (c5)
                self._event(fixture("c5-watch-compacted-rv-nowatchcache-410.ndjson"))
                self._chunk(b"")
            elif stream.run(time.monotonic() + timeout):
                self._chunk(b"")

    def _event(self, event: Any) -> None:
        """One watch event, cut in two chunks: a client must put lines together across chunks."""
        line = _compact(event)
        middle = len(line) // 2
        self._chunk(line[:middle])
        self._chunk(line[middle:])

    # -- pods and namespaces ----------------------------------------------------------------------------

    def list_pods(self, query: dict[str, str]) -> None:
        if self._forbidden("pods", "list"):
            return
        selector = _selector(query.get("fieldSelector", ""))
        if query.get("watch") in ("true", "1", "True"):
            self._watch(query, lambda state: state.pod_events, selector)
            return
        with self.api.cond:
            error = self.state.list_errors.pop(0) if self.state.list_errors else None
            items = [copy.deepcopy(p) for _, p in sorted(self.state.pod_objects.items()) if selector(p)]
            rv = self.state.rv
        if error is not None:
            self._json(error, _status(error, "InternalError", f"injected error {error}"))
            return
        self._chunked(
            _compact({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}, "items": items})
        )

    def list_namespaces(self, query: dict[str, str]) -> None:
        if query.get("watch") in ("true", "1", "True"):
            self._watch(query, lambda state: state.namespace_events, _everything)
            return
        with self.api.cond:
            items = [copy.deepcopy(n) for _, n in sorted(self.state.namespaces.items())]
            rv = self.state.rv
        listed = {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}, "items": items}
        self._chunked(_compact(listed))

    def _watch(self, query: dict[str, str], events: Callable[[_State], list[_Event]], selector: Selector) -> None:
        with self.api.cond:
            start = int(query.get("resourceVersion") or self.state.rv)
            expiries, bookmarks = self.state.expiries, self.state.bookmarks
            expired = start < self.state.compacted
        timeout = min(int(query.get("timeoutSeconds") or _MAX_WATCH_SECONDS), _MAX_WATCH_SECONDS)
        stream = _WatchStream(self, start, expiries, bookmarks, query.get("allowWatchBookmarks") == "true")
        stream.events_of, stream.selector = events, selector
        with contextlib.suppress(OSError, ValueError):
            self._start_chunked()
            if expired:
                self._event(pod_fixture("x2-pods-watch-selector-rv1-expired.ndjson"))
                self._chunk(b"")
            elif stream.run(time.monotonic() + timeout):
                self._chunk(b"")

    # -- metrics.k8s.io ---------------------------------------------------------------------------------

    def list_metrics(self, query: dict[str, str]) -> None:
        with self.api.cond:
            status, usage = self.state.metrics_status, copy.deepcopy(self.state.usage)
        if status == 404:
            self._json(404, _status(404, "NotFound", "the server could not find the requested resource", {}))
        elif status == 503:
            body = (APISERVER_FIXTURES / "m10-metrics-nodes-list-apiservice-unavailable-503.txt").read_bytes()
            self._body(503, body, "text/plain; charset=utf-8")
        else:
            self._json(200, _metrics_list(usage))

    def list_pod_metrics(self, query: dict[str, str]) -> None:
        with self.api.cond:
            status, usage = self.state.metrics_status, copy.deepcopy(self.state.pod_usage)
            chunked = self.state.pod_metrics_chunked
        if status != 200:
            self._json(404, _status(404, "NotFound", "the server could not find the requested resource", {}))
        elif chunked:
            self._chunked(_compact(_pod_metrics_list(usage)))
        else:
            self._json(200, _pod_metrics_list(usage))

    # -- pods/binding -----------------------------------------------------------------------------------

    def bind_pod(self, query: dict[str, str], namespace: str, name: str) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        code, answer = self._bind(namespace, name, body)
        self._json(code, answer)

    def _bind(self, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.api.cond:
            self.state.bindings.append(body)
            pod = self.state.pods.get((namespace, name))
            uid = (body.get("metadata") or {}).get("uid")
            node = (body.get("target") or {}).get("name", "")
            if self.state.bind_forbidden:
                message = (
                    f'pods "{name}" is forbidden: User "system:serviceaccount:kube-system:rulesched" cannot create '
                    f'resource "pods/binding" in API group "" in the namespace "{namespace}"'
                )
                return 403, _status(403, "Forbidden", message, {"name": name, "kind": "pods"})
            if pod is None:
                return 404, _recorded("b4-binding-missing-pod-404.json", nope=name)
            if uid and uid != pod.uid:
                message = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod.uid}"
                return 409, _status(409, "Conflict", message, {"name": name, "kind": "pods/binding"})
            if pod.node:
                return 409, _recorded("b3-binding-already-bound-409.json", **{"b-target": name, "node-a": pod.node})
            pod.node = node
            found = self.state.pod_objects.get((namespace, name))
            if found is not None:
                bound = copy.deepcopy(found)
                bound["spec"]["nodeName"] = node
                condition = {"type": "PodScheduled", "status": "True", "lastProbeTime": None}
                bound.setdefault("status", {}).setdefault("conditions", []).append(
                    {**condition, "lastTransitionTime": _now()}
                )
                self.api._pod_change("MODIFIED", bound)
        # What kube-apiserver answers to a Binding: a Status "Success" with code 201 (not the Binding).
        return 201, _recorded("w4-binding-201.json")

    # -- single pods and namespaces ---------------------------------------------------------------------

    def _forbidden(self, resource: str, verb: str) -> bool:
        with self.api.cond:
            if (resource, verb) not in self.state.forbidden:
                return False
        recorded = (APISERVER_FIXTURES / "d5-secrets-list-forbidden-403.json").read_text()
        self._json(403, json.loads(recorded.replace("secrets", resource).replace("cannot list", f"cannot {verb}")))
        return True

    def get_pod(self, query: dict[str, str], namespace: str, name: str) -> None:
        if self._forbidden("pods", "get"):
            return
        with self.api.cond:
            pod = copy.deepcopy(self.state.pod_objects.get((namespace, name)))
        if pod is None:
            self._json(404, _recorded("p12-pod-get-missing-404.json", nope=name))
        else:
            self._json(200, {"kind": "Pod", "apiVersion": "v1", **pod})

    def get_namespace(self, query: dict[str, str], name: str) -> None:
        if self._forbidden("namespaces", "get"):
            return
        with self.api.cond:
            namespace = copy.deepcopy(self.state.namespaces.get(name))
        if namespace is None:
            message = f'namespaces "{name}" not found'
            self._json(404, _status(404, "NotFound", message, {"name": name, "kind": "namespaces"}))
        else:
            self._json(200, {"kind": "Namespace", "apiVersion": "v1", **namespace})

    # -- pods: PATCH (a JSON merge patch of metadata, as the requeue nudge sends) -------------------------

    def patch_pod(self, query: dict[str, str], namespace: str, name: str) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        code, answer = self._patch(namespace, name, body)
        with self.api.cond:
            self.state.patches.append(
                {"path": self.path, "contentType": self.headers.get("Content-Type"), "body": body, "code": code}
            )
        if code == 429:
            self.send_response(429)
            self.send_header("Retry-After", "1")
            raw = _compact(answer)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        self._json(code, answer)

    def _patch(self, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.api.cond:
            error = self.state.patch_errors.pop(0) if self.state.patch_errors else None
            if self.state.patch_forbidden:
                error = 403
            found = self.state.pod_objects.get((namespace, name))
        if error is not None:
            return error, _refusal(error, namespace, name)
        if found is None:
            return 404, _refusal(404, namespace, name)
        metadata = body.get("metadata") or {}
        if metadata.get("uid") and metadata["uid"] != found["metadata"].get("uid"):  # a uid is immutable
            message = f'Pod "{name}" is invalid: metadata.uid: Invalid value: "{metadata["uid"]}": field is immutable'
            return 422, _status(422, "Invalid", message, {"name": name, "kind": "Pod"})
        version = metadata.get("resourceVersion")
        if version and version != found["metadata"].get("resourceVersion"):  # optimistic concurrency
            return 409, _refusal(409, namespace, name)
        patched = copy.deepcopy(found)
        annotations = patched["metadata"].setdefault("annotations", {})
        for key, value in (metadata.get("annotations") or {}).items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        if patched != found:  # as kube-apiserver: a patch that changes nothing writes nothing (no new version)
            self.api._pod_change("MODIFIED", patched)
        return 200, {"kind": "Pod", "apiVersion": "v1", **patched}


def _refusal(code: int, namespace: str, name: str) -> dict[str, Any]:
    """kube-apiserver's Status for a refused pod patch (the form of the recorded refusals, d4 and b4)."""
    if code == 403:
        message = (
            f'pods "{name}" is forbidden: User "system:serviceaccount:rulesched-system:rulesched" cannot patch '
            f'resource "pods" in API group "" in the namespace "{namespace}"'
        )
        return _status(403, "Forbidden", message, {"name": name, "kind": "pods"})
    if code == 404:
        return _status(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
    if code == 409:
        message = f'Operation cannot be fulfilled on pods "{name}": the object has been modified'
        return _status(409, "Conflict", message, {"name": name, "kind": "pods"})
    if code == 429:
        return _status(429, "TooManyRequests", "Too many requests, please try again later.", {"retryAfterSeconds": 1})
    return _status(code, "InternalError", f"injected error {code}")


class _WatchStream:
    """One open watch: history after `start`, then live events, bookmarks, expiry, or the server going down."""

    def __init__(self, handler: _Handler, start: int, expiries: int, bookmarks: int, allow: bool) -> None:
        self.events_of: Callable[[_State], list[_Event]] = lambda state: state.events
        self.selector: Selector = _everything
        self.handler = handler
        self.sent = start
        self.expiries = expiries
        self.bookmarks = bookmarks
        self.allow_bookmarks = allow

    def run(self, deadline: float) -> bool:
        """Stream until the deadline (True: end the stream cleanly) or until cut (False)."""
        api = self.handler.api
        while time.monotonic() < deadline:
            with api.cond:
                state = api.state
                if state.down or state.closing:
                    self.handler._drop()
                    return False
                if state.expiries != self.expiries:
                    self.handler._event(fixture("c5-watch-compacted-rv-nowatchcache-410.ndjson"))
                    return True
                events = [e for e in self.events_of(state) if e.rv > self.sent]
                bookmark = state.bookmarks != self.bookmarks and self.allow_bookmarks
                self.bookmarks, rv = state.bookmarks, state.rv
                if not events and not bookmark:
                    api.cond.wait(_TICK)
                    continue
            for event in events:
                sent = _selected(event, self.selector)
                if sent is not None:
                    self.handler._event(sent)
                self.sent = event.rv
            if bookmark:
                self.handler._event(_bookmark(rv))
        return True


Selector = Callable[[dict[str, Any]], bool]


def _everything(obj: dict[str, Any]) -> bool:
    return True


def _selector(text: str) -> Selector:
    """A field selector of `spec.nodeName` and `status.phase` terms (`=`, `!=`), as kube-apiserver reads it."""
    terms = []
    for term in filter(None, text.split(",")):
        negated = "!=" in term
        path, _, value = term.partition("!=" if negated else "=")
        terms.append((tuple(path.strip().split(".")), value.strip(), negated))

    def matches(obj: dict[str, Any]) -> bool:
        for path, value, negated in terms:
            found: Any = obj
            for key in path:
                found = found.get(key) if isinstance(found, dict) else None
            if ((found or "") == value) == negated:
                return False
        return True

    return matches


def _selected(event: _Event, selector: Selector) -> dict[str, Any] | None:
    """The event a watch with `selector` sees: ADDED when the object enters the selection, DELETED with its
    last matching content (and the new resourceVersion) when it leaves, nothing when it stays out."""
    now = event.kind != "DELETED" and selector(event.obj)
    before = event.before is not None and selector(event.before)
    if event.kind == "DELETED":
        return {"type": "DELETED", "object": event.obj} if selector(event.obj) else None
    if now:
        return {"type": "MODIFIED" if before else "ADDED", "object": event.obj}
    if before:
        assert event.before is not None
        last = copy.deepcopy(event.before)
        last["metadata"]["resourceVersion"] = event.obj["metadata"]["resourceVersion"]
        return {"type": "DELETED", "object": {"kind": "Pod", "apiVersion": "v1", **last}}
    return None


def _bookmark(rv: int) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((APISERVER_FIXTURES / "b1-nodes-watch.ndjson").read_text().splitlines()[-1])
    event["object"]["metadata"]["resourceVersion"] = str(rv)
    return event


def _metrics_list(usage: dict[str, dict[str, Any]]) -> dict[str, Any]:
    items = []
    for name in sorted(usage):
        stamp = usage[name]["timestamp"] or _now()
        metadata = {"name": name, "creationTimestamp": _now(), "labels": {"kubernetes.io/hostname": name}}
        items.append({"metadata": metadata, "timestamp": stamp, "window": "15s", "usage": usage[name]["usage"]})
    return {"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}


def _pod_metrics_list(usage: dict[tuple[str, str], dict[str, str]]) -> dict[str, Any]:
    """A PodMetricsList as metrics-server writes it (tests/fixtures/metrics-server/README.md)."""
    items = []
    for namespace, name in sorted(usage):
        metadata = {"name": name, "namespace": namespace, "creationTimestamp": _now(), "labels": {}}
        containers = [{"name": "app", "usage": usage[(namespace, name)]}]
        items.append({"metadata": metadata, "timestamp": _now(), "window": "15s", "containers": containers})
    return {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}


Route = Callable[..., None]
_ROUTES: list[tuple[tuple[str, ...], Route]] = [
    (("GET", "api", "v1", "nodes"), _Handler.list_nodes),
    (("GET", "api", "v1", "nodes", "*"), _Handler.get_node),
    (("GET", "apis", "metrics.k8s.io", "v1beta1", "nodes"), _Handler.list_metrics),
    (("GET", "apis", "metrics.k8s.io", "v1beta1", "pods"), _Handler.list_pod_metrics),
    (("POST", "api", "v1", "namespaces", "*", "pods", "*", "binding"), _Handler.bind_pod),
    (("GET", "api", "v1", "pods"), _Handler.list_pods),
    (("GET", "api", "v1", "namespaces"), _Handler.list_namespaces),
    (("PATCH", "api", "v1", "namespaces", "*", "pods", "*"), _Handler.patch_pod),
    *WRITE_ROUTES,
    (("GET", "api", "v1", "namespaces", "*", "pods", "*"), _Handler.get_pod),
    (("GET", "api", "v1", "namespaces", "*"), _Handler.get_namespace),
]


def _match(pattern: tuple[str, ...], method: str, parts: list[str]) -> list[str] | None:
    """The `*` segments of the path when `method` and `parts` match `pattern`, else None."""
    if pattern[0] != method or len(pattern) - 1 != len(parts):
        return None
    captured = []
    for want, got in zip(pattern[1:], parts, strict=True):
        if want == "*":
            captured.append(got)
        elif want != got:
            return None
    return captured


def wait_for(check: Callable[[], bool], timeout: float = 5.0, what: str = "the condition") -> None:
    """Poll `check` every 10 ms until it is true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for as long as the block runs.

    The socket is bound and never listens, so no other process can take the port meanwhile (a port
    found free and released at once could be taken by a server started in parallel)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


def make_cache(access: KubeAccess, **options: Any) -> NodeCache:
    """A node cache with short pauses between retries, so outages take milliseconds."""
    fast: dict[str, Any] = {"backoff_initial": 0.02, "backoff_max": 0.1, "connect_timeout": 1.0}
    return NodeCache(access.api, NodeCacheOptions(**(fast | options)))


def write_kubeconfig(path: Path, url: str, token: str = TOKEN) -> Path:
    """Write a kubeconfig for the server at `url` (JSON is YAML) and return its path."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "tester", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config))
    return path


def access_for(api: KubeAPI | str, directory: Path, token: str = TOKEN) -> KubeAccess:
    """A real API client for `api` (or a URL), loaded the way rulesched loads one: from a kubeconfig file."""
    env = KubeEnvironment(environ={}, home=directory)
    url = api if isinstance(api, str) else api.url
    choice = find_config(write_kubeconfig(directory / "kubeconfig", url, token), env)
    assert choice is not None
    return connect(choice, env)
