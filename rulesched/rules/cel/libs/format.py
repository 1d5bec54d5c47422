"""`format`, from cel-go's string extensions (ext/formatting.go) that Kubernetes' base environment has:
`'%s is %d'.format(['cpu', 2])` with the verbs %s %d %f %e %b %o %x %X, `%%`, and a precision for
%f and %e (`%.2f`). Values print as cel-go prints them: doubles shortest (`1e+20`), lists and maps
with their elements (`[1, a]`), durations in seconds (`1.5s`), timestamps in RFC 3339.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any

from rulesched.rules.cel.library import LibraryError, Overload, member

_VERBS = frozenset("sdfeboxX")


def shortest(value: float) -> str:
    """Go's `strconv.FormatFloat(value, 'g', -1, 64)`: the shortest digits, exponent form from 1e+06 and
    below 1e-4."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    digits = Decimal(repr(value))
    exponent = digits.adjusted()
    if value != 0 and (exponent < -4 or exponent >= 6):
        mantissa = format(digits.scaleb(-exponent).normalize(), "f")
        return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    text = format(digits, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _duration(value: datetime.timedelta) -> str:
    seconds = Decimal(value.days * 86400 + value.seconds) + Decimal(value.microseconds) / Decimal(10**6)
    text = format(seconds.normalize(), "f")
    return f"{text}s"


def as_string(value: Any) -> str:
    """What `%s` prints for `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return shortest(value)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.timedelta):
        return _duration(value)
    if isinstance(value, list):
        return "[" + ", ".join(as_string(v) for v in value) + "]"
    if isinstance(value, dict):
        entries = sorted((as_string(k), as_string(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in entries) + "}"
    return str(value)


def _kind(value: Any) -> str:
    kinds = ((bool, "bool"), (int, "int"), (float, "double"), (str, "string"), (bytes, "bytes"), (list, "list"))
    return next((name for cls, name in kinds if isinstance(value, cls)), type(value).__name__)


def _float(value: Any, verb: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    clause = "fixed-point" if verb == "f" else "scientific"
    raise LibraryError(
        f"error during formatting: {clause} clause can only be used on doubles, was given {_kind(value)}"
    )


def _number(value: float, verb: str, precision: int | None) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return format(value, f".{6 if precision is None else precision}{verb}")


def _integer(value: Any, verb: str) -> str:
    if verb in "xX" and isinstance(value, (str, bytes)):
        data = value.encode() if isinstance(value, str) else value
        text = data.hex()
        return text.upper() if verb == "X" else text
    if isinstance(value, bool) and verb == "b":
        return "1" if value else "0"
    if not isinstance(value, int) or isinstance(value, bool):
        clauses = {"d": "decimal", "b": "binary", "o": "octal", "x": "hex", "X": "hex"}
        allowed = "integers, byte buffers, and strings" if verb in "xX" else "integers"
        raise LibraryError(
            f"error during formatting: {clauses[verb]} clause can only be used on {allowed}, was given {_kind(value)}"
        )
    return format(value, {"d": "d", "b": "b", "o": "o", "x": "x", "X": "X"}[verb])


def _clause(verb: str, precision: int | None, value: Any) -> str:
    if verb == "s":
        return as_string(value)
    if verb in "fe":
        return _number(_float(value, verb), verb, precision)
    return _integer(value, verb)


def format_(template: str, args: list[Any]) -> str:
    out: list[str] = []
    index = position = 0
    while position < len(template):
        char = template[position]
        position += 1
        if char != "%":
            out.append(char)
            continue
        if position < len(template) and template[position] == "%":
            out.append("%")
            position += 1
            continue
        precision = None
        if position < len(template) and template[position] == ".":
            end = position + 1
            while end < len(template) and template[end].isdigit():
                end += 1
            precision = int(template[position + 1 : end] or "0")
            position = end
        if position >= len(template):
            raise LibraryError("unexpected end of format string")
        verb = template[position]
        position += 1
        if verb not in _VERBS:
            raise LibraryError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
        if index >= len(args):
            raise LibraryError(f"index {index} out of range")
        out.append(_clause(verb, precision, args[index]))
        index += 1
    return "".join(out)


OVERLOADS: tuple[Overload, ...] = (member("format", ("string", "list"), "string", format_),)
