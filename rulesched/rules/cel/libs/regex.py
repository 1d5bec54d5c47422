"""Kubernetes' regex library (k8s.io/apiserver/pkg/cel/library/regex.go): `find`, `findAll`.

Every regular expression has RE2 semantics on both engines (google-re2, the library behind Go's and
cel-cpp's): no lookaround or backreferences, and matching time linear in the input, so a pod label
cannot make a pattern take exponential time. The standard `matches` is RE2 already on both engines
(cel-cpp's own; celpy's uses google-re2).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from rulesched.rules.cel.library import LibraryError, Overload, member

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the reason is in the error; RE2 would also print it to standard error


CACHED_PATTERNS, CACHED_PATTERN_CHARS = 128, 256
"""Compiled patterns kept (docs/operations/limits.md): only short ones, so the cache stays small even when
patterns come from pod values."""


def compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2; `LibraryError` with RE2's reason when it is not a valid RE2 pattern."""
    return _cached(pattern) if len(pattern) <= CACHED_PATTERN_CHARS else _compile(pattern)


@lru_cache(maxsize=CACHED_PATTERNS)
def _cached(pattern: str) -> Any:
    return _compile(pattern)


def _compile(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else ""
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise LibraryError(f"Illegal regex: error parsing regexp: {text}: `{pattern}`") from None


def find(text: str, pattern: str) -> str:
    match = compiled(pattern).search(text)
    return match.group(0) if match else ""


def find_all_limit(text: str, pattern: str, limit: int) -> list[str]:
    """Go's `FindAllString`: successive non-overlapping matches, an empty match right after the previous
    match ignored; `limit` < 0 means all."""
    found: list[str] = []
    previous_end = -1
    for match in compiled(pattern).finditer(text):
        if limit >= 0 and len(found) >= limit:
            break
        start, end = match.span()
        if start == end == previous_end:
            continue
        found.append(match.group(0))
        previous_end = end
    return found


def find_all(text: str, pattern: str) -> list[str]:
    return find_all_limit(text, pattern, -1)


OVERLOADS: tuple[Overload, ...] = (
    member("find", ("string", "string"), "string", find),
    member("findAll", ("string", "string"), "list", find_all),
    member("findAll", ("string", "string", "int"), "list", find_all_limit),
)
