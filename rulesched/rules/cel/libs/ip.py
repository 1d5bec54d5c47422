"""Kubernetes' IP library (k8s.io/apiserver/pkg/cel/library/ip.go), Go's `netip` rules.

An IP address is carried as its canonical string (Go's `netip.Addr.String()`: dotted IPv4, RFC 5952
IPv6), so `ip('2001:DB8::1') == ip('2001:db8::1')` and `string(ip(x))` is that text. As in
Kubernetes, zones (`fe80::1%eth0`) and IPv4-mapped IPv6 addresses are refused.
"""

from __future__ import annotations

import ipaddress

from rulesched.rules.cel.library import LibraryError, Overload, global_, member
from rulesched.rules.cel.libs.caching import keep_short

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_LINK_LOCAL_MULTICAST_V4 = ipaddress.ip_network("224.0.0.0/24")


CACHED, CACHED_CHARS = 1024, 64
"""Parsed values kept (docs/operations/limits.md); a longer text (never a valid one) is parsed each time."""


@keep_short(CACHED, CACHED_CHARS)
def parse(text: str) -> Address:
    """The address `text` denotes, or `LibraryError` in Kubernetes' words."""
    reason = None
    if "%" in text:
        reason = "IP address with zone value is not allowed"
    else:
        try:
            address = ipaddress.ip_address(text)
        except ValueError as error:
            reason = str(error)
        else:
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                reason = "IPv4-mapped IPv6 address is not allowed"
            else:
                return address
    raise LibraryError(f"IP Address {text!r} parse error during conversion from string: {reason}")


def ip(text: str) -> str:
    return str(parse(text))


def is_ip(text: str) -> bool:
    try:
        parse(text)
    except LibraryError:
        return False
    return True


def is_canonical(text: str) -> bool:
    return str(parse(text)) == text


def family(text: str) -> int:
    return parse(text).version


def is_unspecified(text: str) -> bool:
    return parse(text).is_unspecified


def is_loopback(text: str) -> bool:
    return parse(text).is_loopback


def is_link_local_multicast(text: str) -> bool:
    address = parse(text)
    if isinstance(address, ipaddress.IPv4Address):
        return address in _LINK_LOCAL_MULTICAST_V4
    return (int(address) >> 112) & 0xFF0F == 0xFF02


def is_link_local_unicast(text: str) -> bool:
    return parse(text).is_link_local


def is_global_unicast(text: str) -> bool:
    """Go's `IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or the IPv4 broadcast
    address (private addresses are global unicast)."""
    address = parse(text)
    if isinstance(address, ipaddress.IPv4Address) and int(address) == 0xFFFFFFFF:
        return False
    return not (address.is_unspecified or address.is_loopback or address.is_multicast or address.is_link_local)


OVERLOADS: tuple[Overload, ...] = (
    global_("ip", ("string",), "string", ip),
    global_("isIP", ("string",), "bool", is_ip),
    global_("ip.isCanonical", ("string",), "bool", is_canonical),
    member("family", ("string",), "int", family),
    member("isUnspecified", ("string",), "bool", is_unspecified),
    member("isLoopback", ("string",), "bool", is_loopback),
    member("isLinkLocalMulticast", ("string",), "bool", is_link_local_multicast),
    member("isLinkLocalUnicast", ("string",), "bool", is_link_local_unicast),
    member("isGlobalUnicast", ("string",), "bool", is_global_unicast),
)
