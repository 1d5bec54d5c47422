"""Kubernetes' semver library (k8s.io/apiserver/pkg/cel/library/semverlib.go, blang/semver rules).

A version is carried as its canonical string (`major.minor.patch[-pre][+build]`): `semver('v01.01',
true) == semver('1.1.0')`. Comparisons (`isLessThan`, `isGreaterThan`, `compareTo`) are shared with
quantity and declared in `libs.ordering`; they follow semver precedence (build metadata ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rulesched.rules.cel.library import LibraryError, Overload, global_, member
from rulesched.rules.cel.libs.caching import keep_short

_IDENTIFIER = re.compile(r"[0-9A-Za-z-]+")
_NUMBER = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...]
    build: tuple[str, ...]

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        return text + ("+" + ".".join(self.build) if self.build else "")


def _number(part: str, what: str) -> int:
    if not _NUMBER.fullmatch(part):
        if part[:1] == "0" and part.isdigit():
            raise LibraryError(f"{what} number must not contain leading zeroes {part!r}")
        raise LibraryError(f"invalid character(s) found in {what} number {part!r}")
    return int(part)


def _identifiers(text: str, what: str, numeric_strict: bool) -> tuple[str, ...]:
    parts = tuple(text.split("."))
    for part in parts:
        if not _IDENTIFIER.fullmatch(part):
            raise LibraryError(f"invalid character(s) found in {what} {part!r}")
        if numeric_strict and part.isdigit() and not _NUMBER.fullmatch(part):
            raise LibraryError(f"{what} number must not contain leading zeroes {part!r}")
    return parts


CACHED, CACHED_CHARS = 1024, 256
"""Parsed versions kept (docs/operations/limits.md); a longer one is parsed each time it is read."""


@keep_short(CACHED, CACHED_CHARS)
def parse(text: str) -> Version:
    """blang/semver's strict `Parse`."""
    if not text:
        raise LibraryError("version string empty")
    core, _, build = text.partition("+")
    core, dash, pre = core.partition("-")
    numbers = core.split(".")
    if len(numbers) != 3:
        raise LibraryError("No Major.Minor.Patch elements found")
    major, minor, patch = (_number(p, w) for p, w in zip(numbers, ("major", "minor", "patch"), strict=True))
    pres = _identifiers(pre, "prerelease", True) if dash else ()
    builds = _identifiers(build, "build", False) if "+" in text else ()
    return Version(major, minor, patch, pres, builds)


def normalized(text: str) -> Version:
    """Kubernetes' `normalizeAndParse`: no "v" prefix, missing minor and patch as 0, no leading zeros."""
    parts = text.removeprefix("v").split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            parts[index] = part if part[:1].isdigit() else "0" + part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise LibraryError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def semver(text: str) -> str:
    return str(parse(text))


def semver_normalize(text: str, normalize: bool) -> str:
    return str(normalized(text) if normalize else parse(text))


def is_semver(text: str) -> bool:
    return is_semver_normalize(text, False)


def is_semver_normalize(text: str, normalize: bool) -> bool:
    try:
        semver_normalize(text, normalize)
    except LibraryError:
        return False
    return True


def is_canonical(text: str) -> bool:
    """Whether `text` is a version as `semver()` gives it (and so not a quantity, which has no two dots)."""
    try:
        return str(parse(text)) == text
    except LibraryError:
        return False


def _pre_key(identifier: str) -> tuple[int, int, str]:
    return (0, int(identifier), "") if identifier.isdigit() else (1, 0, identifier)


def compare(left: str, right: str) -> int:
    a, b = parse(left), parse(right)
    if (a.major, a.minor, a.patch) != (b.major, b.minor, b.patch):
        return -1 if (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch) else 1
    if not a.pre or not b.pre:
        return (not a.pre) - (not b.pre)
    ka, kb = [_pre_key(p) for p in a.pre], [_pre_key(p) for p in b.pre]
    return (ka > kb) - (ka < kb)


OVERLOADS: tuple[Overload, ...] = (
    global_("semver", ("string",), "string", semver),
    global_("semver", ("string", "bool"), "string", semver_normalize),
    global_("isSemver", ("string",), "bool", is_semver),
    global_("isSemver", ("string", "bool"), "bool", is_semver_normalize),
    member("major", ("string",), "int", lambda text: parse(text).major),
    member("minor", ("string",), "int", lambda text: parse(text).minor),
    member("patch", ("string",), "int", lambda text: parse(text).patch),
)
