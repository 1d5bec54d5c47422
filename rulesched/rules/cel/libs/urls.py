"""Kubernetes' URL library (k8s.io/apiserver/pkg/cel/library/urls.go): Go's `url.ParseRequestURI`.

A URL is carried as the string it was parsed from (checked by `url()`); the accessors parse it again
(cached). As in Kubernetes, a URL is what Go's `url.ParseRequestURI` accepts: an absolute URI
(`https://host/path`, `mailto:x`) or an absolute path (`/path`), a relative reference refused; its
components are then those `url.Parse` finds, the `#fragment` split off.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache

from rulesched.rules.cel.library import LibraryError, Overload, global_, member

_HEX = frozenset(string.hexdigits)
_ALNUM = frozenset(string.ascii_letters + string.digits)
_HOST_CHARS = _ALNUM | frozenset("-._~!$&'()*+,;=:[]<>\"%")
_USERINFO_CHARS = _ALNUM | frozenset("-._:~!$&'()*+,;=%@")
_PATH_KEPT = _ALNUM | frozenset("-_.~$&+,/:;=@")
_PATH_VALID = _PATH_KEPT | frozenset("!'()*[]%")


@dataclass(frozen=True, slots=True)
class Url:
    scheme: str
    host: str
    path: str
    raw_path: str
    raw_query: str


def _fail(text: str, reason: str) -> LibraryError:
    return LibraryError(f"URL parse error during conversion from string: parse {text!r}: {reason}")


def _unescape(text: str, plus_is_space: bool = False) -> str:
    """Go's `unescape`: %XX sequences decoded (as UTF-8), `+` a space in a query; `ValueError` on a bad escape."""
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%":
            pair = text[index + 1 : index + 3]
            if len(pair) < 2 or not set(pair) <= _HEX:
                raise ValueError(f"invalid URL escape {text[index : index + 3]!r}")
            out.append(int(pair, 16))
            index += 3
            continue
        out += (" " if plus_is_space and char == "+" else char).encode()
        index += 1
    return out.decode(errors="replace")


def _scheme(text: str) -> tuple[str, str]:
    for index, char in enumerate(text):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if index == 0:
                return "", text
            continue
        if char == ":":
            if index == 0:
                raise LibraryError("missing protocol scheme")
            return text[:index].lower(), text[index + 1 :]
        return "", text
    return "", text


def _valid_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all(c.isdigit() for c in port[1:]))


def _host(text: str, authority: str) -> str:
    userinfo, at, host = authority.rpartition("@")
    if at and not set(userinfo) <= _USERINFO_CHARS:
        raise _fail(text, "net/url: invalid userinfo")
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            raise _fail(text, "missing ']' in host")
        if not _valid_port(host[close + 1 :]):
            raise _fail(text, f"invalid port {host[close + 1 :]!r} after host")
    elif (colon := host.rfind(":")) >= 0 and not _valid_port(host[colon:]):
        raise _fail(text, f"invalid port {host[colon:]!r} after host")
    bad = next((c for c in host if c.isascii() and c not in _HOST_CHARS), None)
    if bad is not None:
        raise _fail(text, f"invalid character {bad!r} in host name")
    try:
        return _unescape(host)
    except ValueError as error:
        raise _fail(text, str(error)) from None


CACHED, CACHED_CHARS = 1024, 2048
"""Parsed URLs kept (docs/operations/limits.md); a longer URL is parsed each time it is read."""


def parse(text: str) -> Url:
    """The components of URL `text`, as Kubernetes reads them: checked by Go's `url.ParseRequestURI`,
    then parsed by `url.Parse` (which splits the `#fragment` off); `LibraryError` in Go's words."""
    return _cached(text) if len(text) <= CACHED_CHARS else _components(text)


@lru_cache(maxsize=CACHED)
def _cached(text: str) -> Url:
    return _components(text)


def _components(text: str) -> Url:
    _parse(text, via_request=True)
    return _parse(text.partition("#")[0], via_request=False)


def _parse(text: str, via_request: bool) -> Url:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise _fail(text, "net/url: invalid control character in URL")
    if not text:
        raise _fail(text, "empty url")
    try:
        scheme, rest = _scheme(text)
    except LibraryError as error:
        raise _fail(text, str(error)) from None
    rest, _, raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return Url(scheme, "", "", "", raw_query)  # opaque: `mailto:someone`
        if via_request or not rest:
            raise _fail(text, "invalid URI for request")
    host = ""
    if (scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        host, rest = _host(text, authority), slash + path
    try:
        path = _unescape(rest)
    except ValueError as error:
        raise _fail(text, str(error)) from None
    return Url(scheme, host, path, rest, raw_query)


def url(text: str) -> str:
    parse(text)
    return text


def is_url(text: str) -> bool:
    try:
        parse(text)
    except LibraryError:
        return False
    return True


def _split_port(host: str) -> tuple[str, str]:
    colon = host.rfind(":")
    name, port = (host[:colon], host[colon + 1 :]) if colon >= 0 and _valid_port(host[colon:]) else (host, "")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name, port


def escaped_path(text: str) -> str:
    """Go's `EscapedPath`: the path as written when that is a valid encoding, else the path escaped."""
    parsed = parse(text)
    if set(parsed.raw_path) <= _PATH_VALID:
        return parsed.raw_path
    return "".join(c if c in _PATH_KEPT else "".join(f"%{b:02X}" for b in c.encode()) for c in parsed.path)


def query(text: str) -> dict[str, list[str]]:
    """Go's `url.Query()`: `&`-separated pairs, a pair with `;` or a bad escape skipped."""
    found: dict[str, list[str]] = {}
    for pair in parse(text).raw_query.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = _unescape(key, True), _unescape(value, True)
        except ValueError:
            continue
        found.setdefault(key, []).append(value)
    return found


OVERLOADS: tuple[Overload, ...] = (
    global_("url", ("string",), "string", url),
    global_("isURL", ("string",), "bool", is_url),
    member("getScheme", ("string",), "string", lambda text: parse(text).scheme),
    member("getHost", ("string",), "string", lambda text: parse(text).host),
    member("getHostname", ("string",), "string", lambda text: _split_port(parse(text).host)[0]),
    member("getPort", ("string",), "string", lambda text: _split_port(parse(text).host)[1]),
    member("getEscapedPath", ("string",), "string", escaped_path),
    member("getQuery", ("string",), "map", query),
)
