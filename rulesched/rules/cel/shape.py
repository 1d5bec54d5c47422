"""What the cost estimate knows of a value's size (`Shape`), and the sizes it assumes where Kubernetes sets
limits (docs/rules/cost.md): shared by the estimator (`cost.py`) and the context names' declarations
(`rules/vocabulary.py`), which give each name its shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_REQUEST_BYTES = 3 * 1024 * 1024
"""Kubernetes' maxRequestSizeBytes: no object (pod, node) is larger."""
ANNOTATIONS_BYTES = 256 * 1024
"""Kubernetes' limit on all of an object's annotations together (TotalAnnotationSizeLimitB)."""
STRING_DEFAULT = 4096
"""A string field Kubernetes sets no limit for (an image, an environment value): rulesched's assumption."""
LIST_DEFAULT = 128
"""A list or map Kubernetes sets no maxItems for (containers, taints, labels): rulesched's assumption."""
PODS_PER_NODE = 250
"""`pods`: the kubelet's `maxPods` is 110 by default, 250 on the largest managed nodes."""
VIEW_ANNOTATION_CHARS = 1024
"""Annotations kept in the views of `pods` and `namespaceObject` (`rules.pod_values.ANNOTATION_MAX_CHARS`)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What the estimate knows of a value: its largest size (characters, or elements of a list or map),
    the shape of its elements, and of its named fields. `size` None: not known to be sized (a number)."""

    size: int | None = None
    item: Shape | None = None
    fields: Mapping[str, Shape] = field(default_factory=dict)
    unknown: bool = False
    """Any JSON value: counts as a string of STRING_DEFAULT or a list of LIST_DEFAULT, as it is used."""
    mapping: bool = False
    """A map: `in` is a lookup, not a scan."""

    def length(self, as_list: bool = False) -> int:
        if self.size is not None:
            return self.size
        if self.unknown:
            return LIST_DEFAULT if as_list else STRING_DEFAULT
        return 1

    def element(self) -> Shape:
        return self.item or (ANY if self.unknown else SCALAR)

    def member(self, name: str) -> Shape:
        return self.fields.get(name) or self.element()


SCALAR = Shape()
ANY = Shape(unknown=True)


def string(size: int) -> Shape:
    """A string of at most `size` characters."""
    return Shape(size=size)


def mapping(value: Shape, entries: int = LIST_DEFAULT) -> Shape:
    """A map of at most `entries` entries, each value of shape `value`."""
    return Shape(size=entries, item=value, mapping=True)


def record(**fields: Shape) -> Shape:
    """A JSON object whose named fields have known shapes (any other field: any JSON value)."""
    return Shape(unknown=True, fields=fields)


LABELS = mapping(string(63))
"""Label values are at most 63 characters."""
ANNOTATIONS = mapping(string(ANNOTATIONS_BYTES))
METADATA = record(name=string(253), namespace=string(63), uid=string(36), labels=LABELS, annotations=ANNOTATIONS)
NUMBERS = mapping(SCALAR)
"""A map of resource names to numbers (`allocatable`, `requests`, `allocated`)."""
