"""The cost of each function call an expression makes, by the shapes of its target and arguments.

The Kubernetes library costs (k8s.io/apiserver/pkg/cel/library/cost.go) and cel-go's string extensions
and standard functions: a call costs 1 plus what it traverses; traversing a string costs 0.1 per
character, a regular expression 0.25 per character of the pattern times 0.1 per character matched. Each
cost also gives the shape (size) of the call's result. The walk over the expression that sums them is
`cost.py`; docs/rules/cost.md explains the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from rulesched.rules.cel.libs.formats import FORMATS
from rulesched.rules.cel.shape import ANY, LIST_DEFAULT, SCALAR, Shape

FORMAT_NAMES = tuple(FORMATS)
STRING_FACTOR = 0.1
"""cel-go's StringTraversalCostFactor."""
REGEX_FACTOR = 0.25
"""cel-go's RegexStringLengthCostFactor."""
UNKNOWN_CALL_FACTOR = 1.0
"""A function the model does not know costs 1 plus one unit per character or element of its arguments."""


def _ceil(value: float) -> int:
    return math.ceil(value - 1e-9) if value > 0 else 0


def traverse(size: int, factor: float = STRING_FACTOR) -> int:
    return _ceil(size * factor)


CallCost = Callable[[Shape | None, Sequence[Shape]], tuple[int, Shape]]


def _size_of(shape: Shape | None, as_list: bool = False) -> int:
    return shape.length(as_list) if shape is not None else 0


def _traversal(result: str = "scalar", factor: float = STRING_FACTOR, of: str = "target") -> CallCost:
    """A function that reads its target (or first argument) once; its result sized like its input
    ("same"), a list of its characters ("chars"), or a scalar."""

    def cost(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
        source = target if of == "target" and target is not None else (args[0] if args else target)
        size = _size_of(source)
        shape = {"same": Shape(size=size), "chars": Shape(size=size, item=Shape(size=size))}.get(result, SCALAR)
        return max(1, traverse(size, factor)), shape

    return cost


def _fixed(cost: int = 1) -> CallCost:
    return lambda target, args: (cost, SCALAR)


def _regex(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    subject = _size_of(target) if target is not None else _size_of(args[0] if args else None)
    pattern = _size_of(args[-1] if target is not None else (args[1] if len(args) > 1 else None))
    cost = traverse(subject + 1) * max(1, traverse(pattern, REGEX_FACTOR))
    return max(1, cost), Shape(size=subject, item=Shape(size=subject))


def _contains(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    return max(1, traverse(_size_of(target)) * max(1, traverse(_size_of(args[0] if args else None)))), SCALAR


def _starts(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    return max(1, traverse(_size_of(args[0] if args else None))), SCALAR


def _replace(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    size = _size_of(target)
    old = args[0].size if args and args[0].size is not None else 0
    new = _size_of(args[1]) if len(args) > 1 else 0
    count = size + 1 if old == 0 else (0 if new <= old else math.ceil(size / old))
    return max(1, traverse(size, 2 * STRING_FACTOR)), Shape(size=size + count * new)


def _split(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    size = _size_of(target)
    return max(1, traverse(size, 2 * STRING_FACTOR)), Shape(size=size, item=Shape(size=size))


def _join(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    items = _size_of(target, as_list=True)
    element = target.element().length() if target is not None else 0
    size = items * element + max(0, items - 1) * _size_of(args[0] if args else None)
    return max(1, traverse(size)), Shape(size=size)


def _list_scan(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    """isSorted, sum, min, max, indexOf, lastIndexOf: one comparison per element (strings: traversed)."""
    if target is None and args:
        target, args = args[0], args[1:]
    if target is not None and (target.item is not None or (target.unknown and not target.size)):
        items = target.length(as_list=True)
        element = target.element()
        each = 1 + (traverse(element.length()) if element.size is not None or element.unknown else 0)
        return max(1, items * each), element
    return max(1, traverse(_size_of(target))), SCALAR


def _sets(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    sizes = [a.length(as_list=True) for a in args] or [1]
    return max(1, math.prod(sizes)), SCALAR


def _quote(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    size = _size_of(args[0] if args else target)
    return max(1, traverse(size)), Shape(size=2 * size + 2)


def _format(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    size = _size_of(target) + sum(a.length(as_list=True) * a.element().length() for a in args)
    return max(1, traverse(size)), Shape(size=size)


def _string_conversion(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    source = args[0] if args else target
    size = _size_of(source) if source is not None and (source.size is not None or source.unknown) else 32
    return max(1, traverse(size)), Shape(size=size)


def _size(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    return 1, SCALAR


_ACCESSORS: tuple[str, ...] = (
    # quantity, ip, cidr, url, semver, optional, timestamp, math: accessors and comparisons, O(1)
    "sign",
    "asInteger",
    "isInteger",
    "asApproximateFloat",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "add",
    "sub",
    "mul",
    "div",
    "divInt",
    "masked",
    "prefixLength",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "major",
    "minor",
    "patch",
    "hasValue",
    "value",
    "orValue",
    "or",
    "of",
    "none",
    "ofNonZeroValue",
    "optMap",
    "optFlatMap",
    "int",
    "uint",
    "double",
    "bool",
    "bytes",
    "duration",
    "timestamp",
    "type",
    "dyn",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
    "abs",
    "ceil",
    "floor",
    "round",
    "trunc",
    "sqrt",
    "isInf",
    "isNaN",
    "isFinite",
    "bitAnd",
    "bitOr",
    "bitXor",
    "bitNot",
    "bitShiftLeft",
    "bitShiftRight",
    "greatest",
    "least",
    "first",
    "last",
)


_PARSERS: tuple[str, ...] = (
    # parse their (string) argument once
    "url",
    "isURL",
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "quantity",
    "isQuantity",
    "semver",
    "isSemver",
    "charAt",
    "reverse",
)


FUNCTIONS: Mapping[str, CallCost] = {
    **{name: _fixed() for name in _ACCESSORS},
    **{name: _traversal(of="argument") for name in _PARSERS},
    "ip.isCanonical": _traversal(factor=2 * STRING_FACTOR, of="argument"),
    "containsIP": lambda t, a: (4 + traverse(_size_of(a[0] if a else None)), SCALAR),
    "containsCIDR": lambda t, a: (6 + traverse(_size_of(a[0] if a else None)), SCALAR),
    "size": _size,
    "startsWith": _starts,
    "endsWith": _starts,
    "contains": _contains,
    "matches": _regex,
    "find": _regex,
    "findAll": _regex,
    "lowerAscii": _traversal("same"),
    "upperAscii": _traversal("same"),
    "trim": _traversal("same"),
    "substring": _traversal("same"),
    "replace": _replace,
    "split": _split,
    "join": _join,
    "quote": _quote,
    "format": _format,
    "string": _string_conversion,
    "isSorted": _list_scan,
    "sum": _list_scan,
    "min": _list_scan,
    "max": _list_scan,
    "indexOf": _list_scan,
    "lastIndexOf": _list_scan,
    "slice": _list_scan,
    "flatten": _list_scan,
    "distinct": _list_scan,
    "sort": _list_scan,
    "range": lambda t, a: (1, Shape(size=LIST_DEFAULT, item=SCALAR)),
    "sets.contains": _sets,
    "sets.equivalent": _sets,
    "sets.intersects": _sets,
    "strings.quote": _quote,
    # reads the key once; each character escaped is two (`/` → `~1`)
    "jsonpatch.escapeKey": lambda t, a: (
        max(1, traverse(_size_of(a[0] if a else None))),
        Shape(size=2 * _size_of(a[0] if a else None)),
    ),
    "math.greatest": _list_scan,
    "math.least": _list_scan,
    # Kubernetes' format library: a validator reads the string once (a list of reasons, bounded, comes back)
    "validate": _traversal(of="argument"),
    "named": _fixed(),
    **{f"format.{name}": _fixed() for name in FORMAT_NAMES},
}
"""Every function the model knows: the Kubernetes libraries (lists, sets, regex, urls, ip, cidr, format,
quantity, semver, jsonpatch), cel-go's string extensions and the standard functions. Others: `_unknown`."""


def _unknown(target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    """A function the model does not know: 1, plus one unit per character or element of each argument
    (a function reading everything it is given), and a result of any size."""
    inputs = [s for s in (target, *args) if s is not None and (s.size is not None or s.unknown)]
    return 1 + _ceil(UNKNOWN_CALL_FACTOR * sum(s.length() for s in inputs)), ANY


def call_cost(name: str, target: Shape | None, args: Sequence[Shape]) -> tuple[int, Shape]:
    """The cost of calling `name` (on `target`, for a method) with `args`, not counting theirs; its result's shape."""
    function = FUNCTIONS.get(name, _unknown)
    if name == "contains" and target is not None and target.item is not None:
        function = _list_scan  # a list's contains
    return function(target, args)
