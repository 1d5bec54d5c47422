"""The Kubernetes CEL libraries, one module each (kyverno's `pkg/cel/libs/<lib>` layout): its
declarations and plain-Python implementation, registered with both engines through `library.Overload`.
docs/rules/functions.md is the reference of every function.
"""

from __future__ import annotations

from rulesched.rules.cel.library import Overload
from rulesched.rules.cel.libs import (
    cidr,
    comprehensions,
    format,
    formats,
    ip,
    jsonpatch,
    lists,
    ordering,
    quantity,
    regex,
    semver,
    sets,
    strings,
    urls,
)

OVERLOADS: tuple[Overload, ...] = (
    *quantity.OVERLOADS,
    *semver.OVERLOADS,
    *ordering.OVERLOADS,
    *regex.OVERLOADS,
    *lists.OVERLOADS,
    *sets.OVERLOADS,
    *strings.OVERLOADS,
    *format.OVERLOADS,
    *formats.OVERLOADS,
    *ip.OVERLOADS,
    *cidr.OVERLOADS,
    *urls.OVERLOADS,
    *comprehensions.OVERLOADS,
    *jsonpatch.OVERLOADS,
)
"""Every library overload, registered with both engines."""
