"""The descheduler's view of a pod: what its exclusions and kube-scheduler's node checks read, from the whole pod.

The rules' view (`rules.pod_values.pod_view`) is bounded for the rules' sake: a few spec fields, and labels and
annotations until 128 entries or 16 KiB, so an annotation can be cut off. Whether a pod may be evicted must
never hang on such a cut: this view keeps, read from the whole object, the annotations the descheduler reads
(`rulesched.io/deschedule`, `kubernetes.io/config.mirror`), the controller, the deletion time, when the pod was
placed, its priority, the kind of each volume, and what kube-scheduler's node checks read (`fit.py`): node name,
node selector, affinity, tolerations, topology spread, pod-level resources and overhead.

Bounded: a view whose spec parts take more than `PLACEMENT_VIEW_MAX_CHARS` characters (as JSON) keeps none of
them and says `oversized`: such a pod is never evicted (nothing is judged on a part of it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from rulesched.cluster.pods.index import assigned_node, pod_key
from rulesched.cluster.sources import parse_timestamp

OPT_OUT = "rulesched.io/deschedule"
"""The annotation that keeps a pod from being evicted by rulesched, with the value "false"."""
MIRROR = "kubernetes.io/config.mirror"
PLACEMENT_VIEW_MAX_CHARS = 32_768
"""Most characters (as JSON) of the spec parts one pod's placement view keeps; a larger pod is never evicted."""
_KEPT_SPEC = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "resources", "overhead")
_ANNOTATION_CHARS = 64


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def scheduled_at(pod: Mapping[str, Any]) -> str | None:
    """When the pod was placed: its `PodScheduled=True` condition's time, else its `status.startTime`."""
    status = _map(pod.get("status"))
    for condition in _list(status.get("conditions")):
        condition = _map(condition)
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            when = condition.get("lastTransitionTime")
            if parse_timestamp(when) is not None:
                return str(when)
    start = status.get("startTime")
    return str(start) if parse_timestamp(start) is not None else None


def node_name_in_spec(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's creator wrote `spec.nodeName` (a controller's template naming a node), rather than a
    scheduler binding it: a binding writes no managed field, a creator's `spec.nodeName` is one of its fields."""
    for entry in _list(_map(pod.get("metadata")).get("managedFields")):
        entry = _map(entry)
        if not entry.get("subresource") and "f:nodeName" in _map(_map(entry.get("fieldsV1")).get("f:spec")):
            return True
    return False


def _volumes(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each volume's name and the kind of its source (`emptyDir`, `persistentVolumeClaim`, …), nothing more."""
    return [
        {"name": str(v.get("name") or "")} | {k: {} for k in v if k != "name"}
        for v in (_map(v) for v in _list(spec.get("volumes")))
    ]


def _metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    annotations = _map(metadata.get("annotations"))
    kept = {k: str(annotations[k])[:_ANNOTATION_CHARS] for k in (OPT_OUT, MIRROR) if k in annotations}
    owners = [_map(o) for o in _list(metadata.get("ownerReferences"))]
    controllers = [{k: o.get(k) for k in ("kind", "name", "uid")} for o in owners if o.get("controller")][:1]
    found = {k: metadata.get(k) for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")}
    return found | {"annotations": kept, "controllers": controllers}


def placement_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The descheduler's view of `pod` (a whole pod object)."""
    metadata, spec = _map(pod.get("metadata")), _map(pod.get("spec"))
    kept = {k: spec[k] for k in _KEPT_SPEC if spec.get(k)} | {"volumes": _volumes(spec)}
    oversized = len(json.dumps(kept, default=str)) > PLACEMENT_VIEW_MAX_CHARS
    view_spec: dict[str, Any] = {} if oversized else kept
    view_spec |= {"priority": spec.get("priority"), "priorityClassName": spec.get("priorityClassName")}
    if node_name_in_spec(pod):
        view_spec["nodeName"] = spec.get("nodeName")
    return {
        "metadata": _metadata(metadata),
        "spec": view_spec,
        "scheduledAt": scheduled_at(pod),
        "oversized": oversized,
    }


class PlacementViews:
    """The placement views of the assigned pods, by uid, fed with the pod cache's list and watch. Thread-safe.

    Bounded: at most `max_pods` views (`--max-pods`); a pod beyond has none, and is never evicted."""

    def __init__(self, max_pods: int = 200_000) -> None:
        self.max_pods = max_pods
        self.overflowed = False
        self._views: dict[str, tuple[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(self, uid: str, node: str) -> dict[str, Any] | None:
        """The view of the pod `uid` if it is on `node`, else None."""
        found = self._views.get(uid)
        return found[1] if found is not None and found[0] == node else None

    def replace(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """Every pod at once (a list): one swap."""
        views: dict[str, tuple[str, dict[str, Any]]] = {}
        for pod in pods:
            uid, node = pod_key(pod), assigned_node(pod)
            if uid and node and len(views) < self.max_pods:
                views[uid] = (node, placement_view(pod))
        with self._lock:
            self._views = views
            self.overflowed = len(views) >= self.max_pods

    def apply(self, kind: str, pod: Mapping[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED) of a pod."""
        uid = pod_key(pod)
        node = assigned_node(pod) if kind != "DELETED" else ""
        with self._lock:
            if not node:
                self._views.pop(uid, None)
            elif uid in self._views or len(self._views) < self.max_pods:
                self._views[uid] = (node, placement_view(pod))
            else:
                self.overflowed = True

    def __len__(self) -> int:
        return len(self._views)
