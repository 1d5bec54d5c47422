"""Kubernetes' CIDR library (k8s.io/apiserver/pkg/cel/library/cidr.go), Go's `netip.Prefix` rules.

A CIDR is carried as its canonical string `address/bits`, the address as written (host bits kept:
`cidr('192.168.0.1/24').masked()` gives `192.168.0.0/24`). `containsIP` and `containsCIDR` take a
value of the other kind or its string, as in Kubernetes.
"""

from __future__ import annotations

import ipaddress

from rulesched.rules.cel.library import LibraryError, Overload, global_, member
from rulesched.rules.cel.libs import ip
from rulesched.rules.cel.libs.caching import keep_short

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


CACHED, CACHED_CHARS = 1024, 64
"""Parsed values kept (docs/operations/limits.md); a longer text (never a valid one) is parsed each time."""


@keep_short(CACHED, CACHED_CHARS)
def parse(text: str) -> tuple[ip.Address, int]:
    """The address and prefix length of `text`, or `LibraryError` in Kubernetes' words."""
    address, slash, bits = text.partition("/")
    reason = None
    if not slash:
        reason = "no '/'"
    elif not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        reason = f"bad bits after slash: {bits!r}"
    else:
        try:
            parsed = ip.parse(address)
        except LibraryError as error:
            reason = str(error)
        else:
            if int(bits) > parsed.max_prefixlen:
                reason = f"prefix length out of range: {bits!r}"
            else:
                return parsed, int(bits)
    raise LibraryError(f"network address parse error during conversion from string: {text!r}: {reason}")


def _network(text: str) -> Network:
    address, bits = parse(text)
    return ipaddress.ip_network(f"{address}/{bits}", strict=False)


def cidr(text: str) -> str:
    address, bits = parse(text)
    return f"{address}/{bits}"


def is_cidr(text: str) -> bool:
    try:
        parse(text)
    except LibraryError:
        return False
    return True


def contains_ip(text: str, address: str) -> bool:
    candidate = ip.parse(address)
    network = _network(text)
    return candidate.version == network.version and candidate in network


def contains_cidr(text: str, other: str) -> bool:
    outer, inner = _network(text), _network(other)
    return outer.version == inner.version and inner.subnet_of(outer)  # type: ignore[arg-type]


def address_of(text: str) -> str:
    return str(parse(text)[0])


def masked(text: str) -> str:
    return str(_network(text))


def prefix_length(text: str) -> int:
    return parse(text)[1]


OVERLOADS: tuple[Overload, ...] = (
    global_("cidr", ("string",), "string", cidr),
    global_("isCIDR", ("string",), "bool", is_cidr),
    member("containsIP", ("string", "string"), "bool", contains_ip),
    member("containsCIDR", ("string", "string"), "bool", contains_cidr),
    member("ip", ("string",), "string", address_of),
    member("masked", ("string",), "string", masked),
    member("prefixLength", ("string",), "int", prefix_length),
)
