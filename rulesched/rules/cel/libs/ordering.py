"""The comparisons quantity and semver share: `isLessThan`, `isGreaterThan`, `compareTo`.

Both types are strings here (library.py), so one overload serves both and looks at its operands: two
canonical versions (`1.2.3`, which no quantity can be: a quantity has at most one dot) compare as
semver, anything else as quantities.
"""

from __future__ import annotations

from rulesched.rules.cel.library import Overload, member
from rulesched.rules.cel.libs import quantity, semver


def compare_to(left: str, right: str) -> int:
    if semver.is_canonical(left) and semver.is_canonical(right):
        return semver.compare(left, right)
    return quantity.compare(left, right)


def is_less_than(left: str, right: str) -> bool:
    return compare_to(left, right) < 0


def is_greater_than(left: str, right: str) -> bool:
    return compare_to(left, right) > 0


OVERLOADS: tuple[Overload, ...] = (
    member("compareTo", ("string", "string"), "int", compare_to),
    member("isLessThan", ("string", "string"), "bool", is_less_than),
    member("isGreaterThan", ("string", "string"), "bool", is_greater_than),
)
