"""The values rules read of a pod and its namespace, computed once: its identity, its requests, and the
trimmed views kept of pods (`pods`) and namespaces (`namespaceObject`).

Pod requests are computed as kube-scheduler computes them (containers summed, the maximum with each init
container, restartable init containers added, plus overhead). A view keeps a bounded part of an object's
labels and annotations, so that the memory a cached pod or namespace takes is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from rulesched.rules.quantity import QuantityError, parse_quantity

_VIEW_METADATA = ("name", "namespace", "uid", "labels", "annotations", "ownerReferences", "creationTimestamp")


_VIEW_SPEC = ("nodeName", "priority", "priorityClassName", "schedulerName")


_OWNER_FIELDS = ("apiVersion", "kind", "name", "uid", "controller")


ANNOTATION_MAX_CHARS = 1024
"""Annotations with longer values (`kubectl.kubernetes.io/last-applied-configuration`, say) are left out of
the views kept of pods and namespaces, so that the memory a cached pod takes is bounded."""


VIEW_MAX_CHARS = 16_384
"""Most characters (keys and values) of labels and annotations one view of a pod or namespace keeps."""


VIEW_MAX_ENTRIES = 128
"""Most labels and annotations, together, one view keeps (the map size the cost estimate assumes).

Labels come first, then annotations, each in key order, until either bound; the rest are left out.
Kubernetes bounds only the annotations (256 KiB); real pods carry a few dozen entries and well under 2 KiB,
so these bite only objects built to be large."""


def _strings(
    value: object, room: tuple[int, int], longest: int = VIEW_MAX_CHARS
) -> tuple[dict[str, str], tuple[int, int]]:
    """The string entries of a map (values of at most `longest` characters) that fit in `room`: (characters
    of keys and values, entries); and the room left."""
    kept: dict[str, str] = {}
    chars, entries = room
    if not isinstance(value, Mapping):
        return kept, room
    for key, item in sorted(value.items(), key=lambda entry: str(entry[0])):
        if isinstance(item, str) and len(item) <= longest:
            chars -= len(str(key)) + len(item)
            entries -= 1
            if chars < 0 or entries < 0:
                return kept, (0, 0)
            kept[str(key)] = item
    return kept, (chars, entries)


def labels_and_annotations(metadata: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and the short annotations a view keeps of `metadata`, within VIEW_MAX_CHARS and
    VIEW_MAX_ENTRIES in all."""
    labels, room = _strings(metadata.get("labels"), (VIEW_MAX_CHARS, VIEW_MAX_ENTRIES))
    annotations, _ = _strings(metadata.get("annotations"), room, ANNOTATION_MAX_CHARS)
    return labels, annotations


def pod_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The trimmed view of a pod that `pods` lists: `metadata`, `spec` (a few fields) and `requests`."""
    metadata = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    assert isinstance(spec, Mapping)
    kept: dict[str, Any] = {k: metadata[k] for k in _VIEW_METADATA if k in metadata and metadata[k] is not None}
    kept["labels"], kept["annotations"] = labels_and_annotations(metadata)
    owners = metadata.get("ownerReferences")
    if isinstance(owners, list):
        kept["ownerReferences"] = [
            {k: o[k] for k in _OWNER_FIELDS if k in o} for o in owners[:8] if isinstance(o, Mapping)
        ]
    return {
        "metadata": kept,
        "spec": {k: spec[k] for k in _VIEW_SPEC if k in spec and spec[k] is not None},
        "requests": pod_requests(pod),
    }


def namespace_view(pod: Mapping[str, Any], namespace: Mapping[str, Any] | None) -> dict[str, Any]:
    """`namespaceObject`: the pod's Namespace trimmed to `metadata.name`, `labels` and `annotations`
    (empty maps when the Namespace is not known)."""
    metadata = namespace.get("metadata") if isinstance(namespace, Mapping) else None
    if not isinstance(metadata, Mapping):
        pod_metadata = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        assert isinstance(pod_metadata, Mapping)
        metadata = {"name": pod_metadata.get("namespace") or "default"}
    labels, annotations = labels_and_annotations(metadata)
    return {"metadata": {"name": str(metadata.get("name") or ""), "labels": labels, "annotations": annotations}}


DEFAULT_NAMESPACE = "default"
"""A pod sent without a namespace is in "default", as the API server and kube-scheduler take it."""


def pod_identity(pod: Mapping[str, Any]) -> dict[str, str]:
    """The pod's namespace, name and uid as strings ("" when absent; the namespace defaults to "default")."""
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    identity = {key: str(metadata.get(key) or "") for key in ("namespace", "name", "uid")}
    identity["namespace"] = identity["namespace"] or DEFAULT_NAMESPACE
    return identity


def _exact(resources: object) -> dict[str, Decimal]:
    """Like `resource_numbers`, but exact, so that sums are exact (100m + 200m is 0.3, not 0.30000000000000004)."""
    if not isinstance(resources, Mapping):
        return {}
    numbers: dict[str, Decimal] = {}
    for name, value in resources.items():
        try:
            numbers[str(name)] = _decimal(value)
        except QuantityError:
            continue
    return numbers


def _decimal(value: object) -> Decimal:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Decimal(value)
    if isinstance(value, str):
        return parse_quantity(value)
    raise QuantityError(f"invalid quantity {value!r}")


def _add(total: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Decimal(0)) + value


def _requests(container: object) -> dict[str, Decimal]:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    return _exact(resources.get("requests") if isinstance(resources, Mapping) else None)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """The pod's effective requests, as kube-scheduler's resource helpers compute them.

    Containers are summed; restartable init containers (sidecars) run alongside them and are added;
    a regular init container runs with the sidecars started before it, and the pod needs at least the
    most any such step needs; overhead comes on top.
    """
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    total: dict[str, Decimal] = {}
    for container in _list(spec.get("containers")):
        _add(total, _requests(container))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in _list(spec.get("initContainers")):
        step = dict(_requests(container))
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            _add(total, step)
            _add(sidecars, step)
            step = dict(sidecars)
        else:
            _add(step, sidecars)
        for name, value in step.items():
            init_peak[name] = max(init_peak.get(name, Decimal(0)), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), value)
    _add(total, _exact(spec.get("overhead")))
    return {name: float(value) for name, value in total.items()}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def namespace_name(pod: Mapping[str, Any]) -> str:
    """The pod's namespace ("default" when it has none, as in Kubernetes)."""
    metadata = pod.get("metadata")
    name = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) and name else "default"
