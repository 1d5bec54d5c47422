"""The literal forms of CEL's `duration()` and `timestamp()`, checked as cel-go reads them: Go's
`time.ParseDuration` within CEL's range, and RFC 3339 (or seconds since the epoch) with years 0001 to
9999. Used to refuse a literal
that can never work at load time (`dialect.py`) and by Kubernetes' `datetime` format (`formats.py`).
"""

from __future__ import annotations

import datetime
import re

_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NANOS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,
    "μs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_MAX_DURATION_NANOS = 315_576_000_000 * 10**9
"""CEL's duration range: ±10,000 years of seconds."""
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|([+-])(\d{2}):(\d{2}))"
)


class InvalidLiteralError(ValueError):
    """A duration or timestamp literal cel-go would refuse."""


def check_duration(text: str) -> None:
    """Go's `time.ParseDuration`, within CEL's range."""
    if not _DURATION.fullmatch(text):
        raise InvalidLiteralError(f"invalid duration {text!r}")
    total = 0.0
    for number, unit in _DURATION_PART.findall(text):
        total += float(number) * _UNIT_NANOS[unit]
    if total > _MAX_DURATION_NANOS:
        raise InvalidLiteralError(f"duration {text!r} out of range")


def check_timestamp(text: str) -> None:
    """RFC 3339, as cel-go's `timestamp()` reads it, years 0001 to 9999."""
    found = _TIMESTAMP.fullmatch(text)
    if found is None:
        raise InvalidLiteralError(f"invalid timestamp {text!r}: not RFC 3339")
    year, month, day, hour, minute, second = (int(found[i]) for i in range(1, 7))
    try:
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError as error:
        raise InvalidLiteralError(f"invalid timestamp {text!r}: {error}") from None
    if found[7] and (int(found[8]) > 23 or int(found[9]) > 59):
        raise InvalidLiteralError(f"invalid timestamp {text!r}: time zone offset out of range")


UNIX_SECONDS = range(-62_135_596_800, 253_402_300_800)
"""The seconds since the epoch `timestamp(int)` takes: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z."""


def check_unix_seconds(seconds: int) -> None:
    """`timestamp(seconds)` within CEL's range, as cel-go and cel-cpp take it."""
    if int(seconds) not in UNIX_SECONDS:
        raise InvalidLiteralError(f"timestamp({seconds}) out of range: years 0001 to 9999")
