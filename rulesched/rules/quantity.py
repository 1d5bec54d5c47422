"""Kubernetes resource quantities (`resource.Quantity`), parsed exactly.

Quantities are compared by value, never as strings: `1500m` equals `1.5`. The grammar is the one the
API server enforces (PROTOCOL.md §5), so a value rulesched accepts is one Kubernetes would accept.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_GRAMMAR = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)

_MULTIPLIERS: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity string such as `250m`, `1.5Gi` or `1e3`."""
    text = str(text)
    match = _GRAMMAR.match(text)
    if match is None:
        raise QuantityError(f"invalid quantity {text!r}: want digits and a suffix such as m, Ki or G")
    number, suffix = match["number"], match["suffix"] or ""
    try:
        if suffix[:1] in ("e", "E") and len(suffix) > 1:
            return Decimal(number + suffix)
        return Decimal(number) * _MULTIPLIERS[suffix]
    except InvalidOperation as error:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"invalid quantity {text!r}") from error


def quantity_value(value: object) -> float:
    """A quantity string or a JSON number as a float (cores, bytes, counts)."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return float(parse_quantity(value))
    raise QuantityError(f"invalid quantity {value!r}")


def canonical(value: Decimal) -> str:
    """The one string form of a value, so that equal quantities compare equal as strings."""
    if value == value.to_integral_value():
        return str(int(value))
    text = format(value.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
