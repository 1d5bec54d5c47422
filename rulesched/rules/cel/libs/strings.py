"""cel-go's string extensions (ext/strings.go), part of Kubernetes' base environment.

Written once here for both engines (cel-cpp's own extension is not loaded: its `indexOf` would clash
with the lists library's). Indices count Unicode code points, as cel-go's do; `format` is in
`libs.format`.
"""

from __future__ import annotations

from typing import Any

from rulesched.rules.cel.library import LibraryError, Overload, global_, member

_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
"""Go's `unicode.IsSpace`, what `strings.TrimSpace` removes (Python's `str.strip` removes more)."""
_QUOTED = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _out_of_range(index: int) -> LibraryError:
    return LibraryError(f"index out of range: {index}")


def char_at(text: str, index: int) -> str:
    if not 0 <= index <= len(text):
        raise _out_of_range(index)
    return text[index : index + 1]


def index_of(text: str, sub: str) -> int:
    return text.find(sub)


def index_of_offset(text: str, sub: str, offset: int) -> int:
    if not 0 <= offset <= len(text):
        raise _out_of_range(offset)
    return text.find(sub, offset)


def last_index_of(text: str, sub: str) -> int:
    return text.rfind(sub)


def last_index_of_offset(text: str, sub: str, offset: int) -> int:
    if not 0 <= offset <= len(text):
        raise _out_of_range(offset)
    return text.rfind(sub, 0, offset + len(sub))


def _ascii(text: str, upper: bool) -> str:
    pick = str.upper if upper else str.lower
    return "".join(pick(c) if c.isascii() else c for c in text)


def replace(text: str, old: str, new: str, count: int = -1) -> str:
    return text.replace(old, new, count)


def split_n(text: str, separator: str, limit: int) -> list[str]:
    """Go's `strings.SplitN`: `limit` 0 gives no parts, < 0 all; an empty separator splits characters."""
    if limit == 0:
        return []
    if separator:
        return text.split(separator, limit - 1 if limit > 0 else -1)
    chars = list(text)
    if 0 < limit < len(chars):
        return [*chars[: limit - 1], "".join(chars[limit - 1 :])]
    return chars


def substring(text: str, start: int, end: int | None = None) -> str:
    stop = len(text) if end is None else end
    if not 0 <= start <= len(text):
        raise _out_of_range(start)
    if not 0 <= stop <= len(text):
        raise _out_of_range(stop)
    if start > stop:
        raise LibraryError(f"invalid substring range. start: {start}, end: {stop}")
    return text[start:stop]


def join(items: list[Any], separator: str = "") -> str:
    if not all(isinstance(item, str) for item in items):
        raise LibraryError("join: the list must hold strings only")
    return separator.join(items)


def quote(text: str) -> str:
    return '"' + "".join(_QUOTED.get(c, c) for c in text) + '"'


OVERLOADS: tuple[Overload, ...] = (
    member("charAt", ("string", "int"), "string", char_at),
    member("indexOf", ("string", "string"), "int", index_of),
    member("indexOf", ("string", "string", "int"), "int", index_of_offset),
    member("lastIndexOf", ("string", "string"), "int", last_index_of),
    member("lastIndexOf", ("string", "string", "int"), "int", last_index_of_offset),
    member("lowerAscii", ("string",), "string", lambda text: _ascii(text, upper=False)),
    member("upperAscii", ("string",), "string", lambda text: _ascii(text, upper=True)),
    member("replace", ("string", "string", "string"), "string", replace),
    member("replace", ("string", "string", "string", "int"), "string", replace),
    member("split", ("string", "string"), "list", lambda text, separator: split_n(text, separator, -1)),
    member("split", ("string", "string", "int"), "list", split_n),
    member("substring", ("string", "int"), "string", substring),
    member("substring", ("string", "int", "int"), "string", substring),
    member("trim", ("string",), "string", lambda text: text.strip(_GO_SPACE)),
    member("join", ("list",), "string", join),
    member("join", ("list", "string"), "string", join),
    member("reverse", ("string",), "string", lambda text: text[::-1]),
    global_("strings.quote", ("string",), "string", quote),
)
