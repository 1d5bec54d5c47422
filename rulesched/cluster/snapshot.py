"""One pod and the cluster around it, read once from the Kubernetes API: what `rulesched explain NAMESPACE/NAME`
decides on (docs/guides/why-did-my-pod-land-there.md).

The pod and the nodes are required; the pods on the nodes, the pod's namespace and metrics-server's samples
are read when the credentials allow and the API serves them, and otherwise left out with a note saying
why (a rule reading them then sees what the server would see without that source). Everything is read
with the same calls the server's caches make, page by page, each with a timeout, never retried.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes.client import CoreV1Api, CustomObjectsApi

from rulesched.cluster.kube.access import KubeAccess, read_json
from rulesched.cluster.kube.errors import ApiError, NotFoundError, api_errors
from rulesched.cluster.metrics.metrics_server import parse_samples
from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.pods.namespaces import KnownNamespaces
from rulesched.cluster.pods.podcache import POD_SELECTOR
from rulesched.rules.context import NodeUsage

PAGE = 500
"""Objects a list call asks for at once (the server's caches page the same way)."""
TIMEOUT = (5.0, 30.0)
"""Connect and read timeouts of each call, in seconds."""

T = TypeVar("T")


class SnapshotError(Exception):
    """The pod or the nodes could not be read; the message says why and what to do."""


@dataclass
class Snapshot:
    """What was read: the pod, the nodes, and the optional sources (None: not available, see `notes`)."""

    pod: Mapping[str, Any]
    nodes: list[Mapping[str, Any]]
    pods: PodIndex | None = None
    namespace: Mapping[str, Any] | None = None
    metrics: SampledMetrics | None = None
    notes: list[str] = field(default_factory=list)

    def namespaces(self) -> KnownNamespaces:
        return KnownNamespaces([self.namespace] if self.namespace else [])


class SampledMetrics:
    """metrics-server's samples as read once (a MetricsSource that never polls)."""

    def __init__(self, document: object, received: datetime.datetime) -> None:
        self._samples = parse_samples(document, received)
        self._received = received

    def usage(self, name: str) -> NodeUsage | None:
        return self._samples.get(name)

    def generation(self) -> Hashable:
        return 0

    def newest_sample_age(self) -> float | None:
        stamps = [s.timestamp for s in self._samples.values() if s.timestamp]
        return (self._received - max(stamps)).total_seconds() if stamps else None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def read_snapshot(access: KubeAccess, namespace: str, name: str) -> Snapshot:
    """The pod `namespace/name`, every node, and what else the API gives; SnapshotError without pod or nodes."""
    core, where = CoreV1Api(access.api), access.describe()
    pod = _required(
        lambda: _get(lambda **kw: core.read_namespaced_pod(name, namespace, **kw)), f"pod {namespace}/{name}", where
    )
    nodes = _required(lambda: list(_pages(core.list_node)), "the nodes", where)
    snapshot = Snapshot(pod=pod, nodes=nodes)
    pods = _optional(
        snapshot, "the pods on the nodes", lambda: list(_pages(core.list_pod_for_all_namespaces, POD_SELECTOR))
    )
    if pods is not None:
        snapshot.pods = PodIndex()
        uid = (pod.get("metadata") or {}).get("uid")
        # The pod is decided as it was before it was bound: not among the pods on its own node.
        snapshot.pods.replace([p for p in pods if (p.get("metadata") or {}).get("uid") != uid])
    snapshot.namespace = _optional(
        snapshot, f"namespace {namespace}", lambda: _get(lambda **kw: core.read_namespace(namespace, **kw))
    )
    custom = CustomObjectsApi(access.api)
    samples = _optional(
        snapshot,
        "node metrics (metrics.k8s.io)",
        lambda: _get(lambda **kw: custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes", **kw)),
    )
    if samples is not None:
        snapshot.metrics = SampledMetrics(samples, datetime.datetime.now(datetime.UTC))
    return snapshot


def _get(call: Callable[..., Any]) -> Any:
    with api_errors():
        response = call(_preload_content=False, _request_timeout=TIMEOUT)
    return read_json(response)


def _pages(list_call: Callable[..., Any], selector: str = "") -> Iterator[Mapping[str, Any]]:
    options: dict[str, Any] = {"field_selector": selector} if selector else {}
    while True:
        page = _get(lambda **kw: list_call(limit=PAGE, **options, **kw))
        yield from (item for item in page.get("items") or [] if isinstance(item, Mapping))
        token = (page.get("metadata") or {}).get("continue") or None
        if token is None:
            return
        options["_continue"] = token


def _required(read: Callable[[], T], what: str, where: str) -> T:
    try:
        return read()
    except NotFoundError as error:
        raise SnapshotError(f"{what}: not found ({error.message}) at {where}") from error
    except ApiError as error:
        raise SnapshotError(f"cannot read {what} from {where}: {error.status} {error.message}") from error
    except Exception as error:  # connection refused, a timeout, a body that is not JSON
        raise SnapshotError(f"cannot read {what} from {where}: {error}") from error


def _optional(snapshot: Snapshot, what: str, read: Callable[[], T]) -> T | None:
    try:
        return read()
    except ApiError as error:
        snapshot.notes.append(f"{what}: not read ({error.status} {error.message}); the rules see none")
    except Exception as error:  # connection refused, a timeout, a body that is not JSON
        snapshot.notes.append(f"{what}: not read ({error}); the rules see none")
    return None
