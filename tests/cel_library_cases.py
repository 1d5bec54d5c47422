"""The Kubernetes CEL library cases of the conformance table (tests/rules/test_cel_conformance.py).

`KUBERNETES` holds Kubernetes' own library test cases (k8s.io/apiserver/pkg/cel/library/*_test.go:
quantity, semver, ip, cidr, format), ported: each expectation as Kubernetes states it, a value, a runtime
error (`Error`) or a compile error (`Refused`). Kubernetes' unit tests run without its literal
validators, so a case whose literal can never work (`ip("192.168.0.1.0")`), a runtime error there, is a
load error here, as in a Kubernetes API server (`Refused`). `KUBERNETES_DIFFERENCES` are the ported
cases rulesched answers differently, and why (docs/rules/functions.md, "Values").

`DOCUMENTED` holds the examples of the Kubernetes CEL documentation and of cel-go's extension tests for
the libraries whose Kubernetes tests are not unit tables (lists, regex, urls, sets, strings, format
verbs, optional types, two-variable comprehensions).
"""

from __future__ import annotations

import itertools
from typing import Any


class Error:
    """An evaluation error whose text contains `fragment` (case-insensitive)."""

    def __init__(self, fragment: str = "") -> None:
        self.fragment = fragment.lower()

    def __repr__(self) -> str:
        return f"Error({self.fragment!r})"


class Refused:
    """A load (compile) error whose text contains `fragment` (case-insensitive)."""

    def __init__(self, fragment: str = "") -> None:
        self.fragment = fragment.lower()

    def __repr__(self) -> str:
        return f"Refused({self.fragment!r})"


Case = tuple[str, Any]

QUANTITY: list[Case] = [
    ('quantity("12Mi") == quantity("12582912")', True),
    ('quantity("10Mo")', Refused("invalid quantity literal")),
    ('quantity("10Mm")', Refused("invalid quantity literal")),
    ('isQuantity("20")', True),
    ('isQuantity("20M")', True),
    ('isQuantity("20Mi")', True),
    ('isQuantity("20Mo")', False),
    ('isQuantity("10Mm")', False),
    ("isQuantity([1, 2, 3])", Refused("found no matching overload for 'isQuantity'")),
    ('quantity("200M") == quantity("200M")', True),
    ('quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True),
    (
        'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M")'
        ' && quantity("0.002G") == quantity("2000k")',
        True,
    ),
    ('quantity("200M") == quantity("0.3G")', False),
    ('quantity("50M").isLessThan(quantity("50Mi"))', True),
    ('quantity("50M").isLessThan(quantity("100M"))', True),
    ('quantity("100M").isLessThan(quantity("50M"))', False),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ('quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
    ('quantity("50M").isGreaterThan(quantity("100M"))', False),
    ('quantity("200M").compareTo(quantity("0.2G"))', 0),
    ('quantity("50M").compareTo(quantity("50Mi"))', -1),
    ('quantity("50Mi").compareTo(quantity("50M"))', 1),
    ('quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ('quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ('quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ('quantity("50k").sub(20) == quantity("49980")', True),
    ('quantity("50k").mul(2) == quantity("100000")', True),
    ('quantity("10000").div(3).asApproximateFloat() - 3333.3333 < 0.0001', True),
    ('quantity("10k").div(2) == quantity("5000")', True),
    ('quantity("10000").divInt(3) == quantity("3333")', True),
    ('quantity("50k").add(20).sub(quantity("100k")).asInteger()', -49980),
    ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()', 20),
    ('quantity("50k").asInteger()', 50000),
    ('quantity("9999999999999999999999999999999999999G").asInteger()', Error("cannot convert value to integer")),
    ('quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ('quantity("50").isInteger()', True),
    ('quantity("50.703k").asApproximateFloat()', 50703.0),
]

SEMVER: list[Case] = [
    ('semver("1.2.3") == semver("1.2.3")', True),
    ('semver("v1.0")', Refused("No Major.Minor.Patch elements found")),
    ('isSemver("1.2.3-beta.1+build.1")', True),
    ('isSemver("")', False),
    ('isSemver("v1.0.0")', False),
    ('isSemver(" 1.0.0")', False),
    ('isSemver("1. 0.0")', False),
    ('isSemver("1.0.0 ")', False),
    ('isSemver("01.01.01")', False),
    ('isSemver("1")', False),
    ('isSemver("1.1")', False),
    ('isSemver("", true)', False),
    ('isSemver(" 1.0.0", true)', False),
    ('isSemver("1. 0.0", true)', False),
    ('isSemver("1.0.0 ", true)', False),
    ('isSemver("v1.0.0", true)', True),
    ('isSemver("01.01.01", true)', True),
    ('isSemver("1", true)', True),
    ('isSemver("1.1", true)', True),
    ("isSemver([1, 2, 3])", Refused("found no matching overload for 'isSemver'")),
    ('semver("v01.01", true) == semver("1.1.0")', True),
    ('semver("1.2.3") == semver("1.2.3")', True),
    ('semver("1.2.3") == semver("1.0.0")', False),
    ('semver("1.0.0").isLessThan(semver("1.2.3"))', True),
    ('semver("1.0.0").isLessThan(semver("1.0.0"))', False),
    ('semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
    ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ('semver("1.2.3").compareTo(semver("1.2.3"))', 0),
    ('semver("1.0.0").compareTo(semver("1.2.3"))', -1),
    ('semver("1.2.3").compareTo(semver("1.0.0"))', 1),
    ('semver("1.2.3").major()', 1),
    ('semver("1.2.3").minor()', 2),
    ('semver("1.2.3").patch()', 3),
]

_IP_PARSE = "parse error during conversion from string"
IP: list[Case] = [
    ('ip("192.168.0.1") == ip("192.168.0.1")', True),
    ('ip("192.168.0.1.0")', Refused(_IP_PARSE)),
    ('isIP("192.168.0.1")', True),
    ('isIP("192.168.0.1.0")', False),
    ('ip.isCanonical("127.0.0.1")', True),
    ('ip.isCanonical("127.0.0.1.0")', Error(_IP_PARSE)),
    ('ip("192.168.0.1").family()', 4),
    ('ip("0.0.0.0").isUnspecified()', True),
    ('ip("127.0.0.1").isUnspecified()', False),
    ('ip("127.0.0.1").isLoopback()', True),
    ('ip("1.2.3.4").isLoopback()', False),
    ('ip("224.0.0.1").isLinkLocalMulticast()', True),
    ('ip("224.0.1.1").isLinkLocalMulticast()', False),
    ('ip("169.254.169.254").isLinkLocalUnicast()', True),
    ('ip("192.168.0.1").isLinkLocalUnicast()', False),
    ('ip("192.168.0.1").isGlobalUnicast()', True),
    ('ip("255.255.255.255").isGlobalUnicast()', False),
    ('ip("2001:db8::68") == ip("2001:db8::68")', True),
    ('ip("2001:db8:::68")', Refused(_IP_PARSE)),
    ('isIP("2001:db8::68")', True),
    ('isIP("2001:db8:::68")', False),
    ('ip.isCanonical("2001:db8::68")', True),
    ('ip.isCanonical("2001:DB8::68")', False),
    ('ip.isCanonical("2001:db8:::68")', Error(_IP_PARSE)),
    ('ip("2001:db8::68").family()', 6),
    ('ip("::").isUnspecified()', True),
    ('ip("::1").isUnspecified()', False),
    ('ip("::1").isLoopback()', True),
    ('ip("2001:db8::abcd").isLoopback()', False),
    ('ip("ff02::1").isLinkLocalMulticast()', True),
    ('ip("fd00::1").isLinkLocalMulticast()', False),
    ('ip("fe80::1").isLinkLocalUnicast()', True),
    ('ip("fd80::1").isLinkLocalUnicast()', False),
    ('ip("2001:db8::abcd").isGlobalUnicast()', True),
    ('ip("ff00::1").isGlobalUnicast()', False),
    ('string(ip("192.168.0.1"))', "192.168.0.1"),
]

_CIDR_PARSE = "network address parse error during conversion from string"
CIDR: list[Case] = [
    ("cidr(192168)", Refused("found no matching overload for 'cidr'")),
    ('cidr(dyn("192.168.0.0/24")) == cidr("192.168.0.0/24")', True),
    ('cidr("192.168.0.0/")', Refused(_CIDR_PARSE)),
    ('cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))', True),
    ('cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))', False),
    ('cidr("192.168.0.0/24").containsIP("192.168.0.1")', True),
    ('cidr("192.168.0.0/24").containsIP("192.168.1.1")', False),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))', True),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))', False),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")', True),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")', False),
    ('cidr("192.168.0.0/24").ip() == ip("192.168.0.0")', True),
    ('cidr("192.168.0.0/24").masked() == cidr("192.168.0.0/24")', True),
    ('cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")', True),
    ('cidr("192.168.0.0/24").prefixLength()', 24),
    ('cidr("2001:db8::/32") == cidr("2001:db8::/32")', True),
    ('cidr("2001:db8::/")', Refused(_CIDR_PARSE)),
    ('cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))', True),
    ('cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))', False),
    ('cidr("2001:db8::/32").containsIP("2001:db8::1")', True),
    ('cidr("2001:db8::/32").containsIP("2001:dc8::1")', False),
    ('cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))', True),
    ('cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))', False),
    ('cidr("2001:db8::/32").containsCIDR("2001:db8::/33")', True),
    ('cidr("2001:db8::/32").containsCIDR("2001:db8::/31")', False),
    ('cidr("2001:db8::/32").ip() == ip("2001:db8::")', True),
    ('cidr("2001:db8::/32").masked() == cidr("2001:db8::/32")', True),
    ('cidr("2001:db8:1::/32").masked() == cidr("2001:db8::/32")', True),
    ('cidr("2001:db8::/32").prefixLength()', 32),
    ('string(cidr("192.168.0.0/24"))', "192.168.0.0/24"),
]

_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and"
    " end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is"
    " '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must"
    " start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is"
    " '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic"
    " character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for"
    " validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_NAME = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an"
    " alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is"
    " '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must"
    " start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used"
    " for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_VALID: list[tuple[str, str]] = [
    ("dns1123Label", "my-label-name"),
    ("dns1123Subdomain", "apiextensions.k8s.io"),
    ("qualifiedName", "apiextensions.k8s.io/v1beta1"),
    ("dns1123LabelPrefix", "my-label-prefix-"),
    ("dns1123SubdomainPrefix", "mysubdomain.prefix.-"),
    ("dns1035LabelPrefix", "my-label-prefix-"),
    ("uri", "http://example.com"),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
    ("byte", "aGVsbG8="),
    ("date", "2021-01-01"),
    ("datetime", "2021-01-01T00:00:00Z"),
    ("dns1123Label", "my-label-name"),
    ("dns1123Subdomain", "example.com"),
    ("dns1035Label", "my-label-name"),
    ("qualifiedName", "my.name"),
    ("byte", "aGVsbG8="),
    ("date", "2020-01-01"),
    ("datetime", "2020-01-01T00:00:00Z"),
    ("labelValue", "my-cool-label-Value"),
]
_INVALID: list[tuple[str, str, str]] = [
    ("dns1123Label", "contains a space", _LABEL),
    ("dns1123Subdomain", "contains a space", _SUBDOMAIN),
    ("dns1035Label", "contains a space", _DNS1035),
    ("qualifiedName", "contains a space", _NAME),
    ("dns1123LabelPrefix", "contains a space-", _LABEL),
    ("dns1123SubdomainPrefix", "contains a space-", _SUBDOMAIN),
    ("dns1035LabelPrefix", "contains a space-", _DNS1035),
    ("byte", "aGVsbG8", "invalid base64"),
    ("date", "2020-01-32", "invalid date"),
    ("datetime", "2020-01-32T00:00:00Z", "invalid datetime"),
    ("labelValue", "my-cool-label-Value!!\\n\\n!!!", _VALUE),
]
FORMAT_NAMES = (
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
)
FORMAT: list[Case] = [
    # Kubernetes expects optional.none(): the result is read with hasValue() (an optional has no plain form)
    *((f'format.{name}().validate("{text}").hasValue()', False) for name, text in _VALID),
    *((f'format.{name}().validate("{text}").value()', [message]) for name, text, message in _INVALID),
    ('format.named("unknown").hasValue()', False),
    *((f'format.named("{name}").hasValue()', True) for name in FORMAT_NAMES),
    *((f'format.named("{name}").value() == format.{name}()', True) for name in FORMAT_NAMES),
    *((f"format.{a}() == format.{b}()", False) for a, b in itertools.permutations(FORMAT_NAMES, 2)),
]

KUBERNETES: dict[str, list[Case]] = {"quantity": QUANTITY, "semver": SEMVER, "ip": IP, "cidr": CIDR, "format": FORMAT}

KUBERNETES_DIFFERENCES: dict[str, tuple[Any, str]] = {
    'type(ip("192.168.0.1")) == net.IP': (
        Refused("undeclared reference to 'net."),
        "an IP is a string here, and there is no type net.IP",
    ),
    'isIP(cidr("192.168.0.0/24"))': (False, "a CIDR is a string here: isIP reads it, and it is not an IP"),
    'type(cidr("192.168.0.0/24")) == net.CIDR': (
        Refused("undeclared reference to 'net."),
        "a CIDR is a string here, and there is no type net.CIDR",
    ),
    "[1, 'a', false].filter(x, x == 1)": (
        [1],
        "a list literal may mix types: Kubernetes' environment (cel-go's HomogeneousAggregateLiterals) refuses"
        " it, but the argument lists of format() mix types in cel-go's own examples ('%s and %d'.format(['cpu',"
        " 2])), so refusing it would refuse rules that work today",
    ),
}
"""Ported Kubernetes cases rulesched answers differently (same on both engines): expression → (what
rulesched answers, why)."""

DOCUMENTED: list[Case] = [
    # lists
    ("[1, 2, 3].isSorted()", True),
    ("['b', 'a'].isSorted()", False),
    ("[].isSorted()", True),
    # lists (the examples of k8s.io/apiserver/pkg/cel/library/lists.go)
    ("['a', 'b', 'b', 'c'].isSorted()", True),
    ("[2.0, 1.0].isSorted()", False),
    ("[1].isSorted()", True),
    ("[1, 3].sum()", 4),
    ("[1.0, 3.0].sum()", 4.0),
    ("[duration('1m'), duration('1s')].sum() == duration('1m1s')", True),
    ("[duration('-1.5s'), duration('1ms')].sum() == duration('-1499ms')", True),
    ("[1, 3].min()", 1),
    ("[1, 3].max()", 3),
    ("[1].min()", 1),
    ("([0] + []).min()", 0),
    ("['a', 'b', 'b', 'c'].lastIndexOf('b')", 2),
    ("[1.0].indexOf(1.1)", -1),
    ("[].indexOf('string')", -1),
    ("[1, 2, 3].sum()", 6),
    ("[1.5, 2.5].sum()", 4.0),
    ("[].sum()", 0),
    ("[1, 2, 3].min()", 1),
    ("[3.5, 1.5].max()", 3.5),
    ("['b', 'c', 'a'].min()", "a"),
    ("[].min()", Error("min called on empty list")),
    ("[].max()", Error("max called on empty list")),
    (
        "[timestamp('2020-01-01T00:00:00Z'), timestamp('2021-01-01T00:00:00Z')].max()"
        " == timestamp('2021-01-01T00:00:00Z')",
        True,
    ),
    ("[1, 2, 2, 3].indexOf(2)", 1),
    ("[1, 2, 2, 3].lastIndexOf(2)", 2),
    ("[1, 2, 3].indexOf(4)", -1),
    ("['a', 'b'].indexOf('b')", 1),
    ("[1, 2].indexOf(2.0)", 1),
    # a literal list of a type the function does not take is refused at load, as Kubernetes refuses it;
    # another list is an evaluation error, alike on both engines
    ("['a', 'b'].sum()", Refused("found no matching overload for 'sum' applied to 'list(string)'")),
    ("[[1], [2]].min()", Refused("found no matching overload for 'min' applied to 'list(list)'")),
    ("[{'a': 1}].max()", Refused("found no matching overload for 'max' applied to 'list(map)'")),
    ("dyn(['a', 'b']).sum()", Error("no such overload: sum of a list of neither numbers nor durations")),
    ("dyn([[1], [2]]).min()", Error("no such overload: min of a list of lists, maps or nulls")),
    ("dyn([null]).max()", Error("no such overload: max of a list of lists, maps or nulls")),
    # regex
    ("'abc 123'.find('[0-9]+')", "123"),
    ("'abc 123'.find('xyz')", ""),
    ("'123 abc 456'.findAll('[0-9]+')", ["123", "456"]),
    ("'123 abc 456'.findAll('[0-9]+', 1)", ["123"]),
    ("'123 abc 456'.findAll('xyz')", []),
    ("'123 abc 456'.findAll('[0-9]+', 0)", []),
    ("'123 abc 456'.findAll('[0-9]+', -1)", ["123", "456"]),
    ("'baaac'.findAll('a*')", ["", "aaa", ""]),
    # regex.go's examples with `[0-9]*`, as Go's regexp answers them (an empty match counts; one right
    # after a match does not): its comments say '123' and ['123', '456'], which Go does not return
    ("'abc 123'.find('[0-9]*')", ""),
    ("'123 abc 456'.findAll('[0-9]*')", ["123", "", "", "", "", "456"]),
    ("'123 abc 456'.findAll('[0-9]*', 1)", ["123"]),
    ("'abc'.matches('^a.c$')", True),
    ("'x'.find(dyn('('))", Error("Illegal regex: error parsing regexp: missing )")),
    ("'x'.matches('(')", Refused("invalid regular expression literal")),
    ("'abc'.matches('a(?=b)')", Refused("invalid perl operator")),
    ("'abc'.find('(?<=a)b')", Refused("invalid perl operator")),
    # urls (the examples of k8s.io/apiserver/pkg/cel/library/urls.go)
    ("url('https://user:pass@example.com:80/path?query=val#fragment').getQuery()", {"query": ["val"]}),
    ("url('https://example.com/path#fragment').getEscapedPath()", "/path"),
    ("url('https://a:b:c/')", Refused("invalid port")),
    ("url('https://example.com/').getScheme()", "https"),
    ("url('https://example.com/').getHost()", "example.com"),
    ("url('https://127.0.0.1:80/').getHostname()", "127.0.0.1"),
    ("url('//host/path').getHost()", "host"),
    ("url('https://example.com/path').getScheme()", "https"),
    ("url('/absolute-path').getScheme()", ""),
    ("url('https://example.com:80/').getHost()", "example.com:80"),
    ("url('https://[::1]:80/').getHost()", "[::1]:80"),
    ("url('https://[::1]/').getHost()", "[::1]"),
    ("url('/path').getHost()", ""),
    ("url('https://example.com:80/').getHostname()", "example.com"),
    ("url('https://[::1]:80/').getHostname()", "::1"),
    ("url('/path').getHostname()", ""),
    ("url('https://example.com:80/').getPort()", "80"),
    ("url('https://example.com/').getPort()", ""),
    ("url('/path').getPort()", ""),
    ("url('https://example.com/path').getEscapedPath()", "/path"),
    ("url('https://example.com/path with spaces/').getEscapedPath()", "/path%20with%20spaces/"),
    ("url('https://example.com').getEscapedPath()", ""),
    ("url('https://example.com/path?k1=a&k2=b&k2=c').getQuery()", {"k1": ["a"], "k2": ["b", "c"]}),
    (
        "url('https://example.com/path?key with spaces=value with spaces').getQuery()",
        {"key with spaces": ["value with spaces"]},
    ),
    ("url('https://example.com/path?').getQuery()", {}),
    ("url('https://example.com/path').getQuery()", {}),
    ("isURL('https://user:pass@example.com:80/path?query=val#fragment')", True),
    ("isURL('/absolute-path')", True),
    ("isURL('https://a:b:c/')", False),
    ("isURL('../relative-path')", False),
    ("isURL('mailto:someone@example.com')", True),
    ("url('../relative-path')", Refused("invalid URI for request")),
    ("url(dyn('../relative-path'))", Error("invalid URI for request")),
    # sets (cel-go ext/sets_test.go)
    ("sets.contains([], [])", True),
    ("sets.contains([1], [])", True),
    ("sets.contains([1], [1])", True),
    ("sets.contains([1], [1, 1])", True),
    ("sets.contains([2, 1], [1])", True),
    ("sets.contains([1], [1.0, 1u])", True),
    ("sets.contains([1, 2.0, 3u], [1.0, 2u, 3])", True),
    ("sets.contains([[1], [2, 3]], [[2, 3.0]])", True),
    ("sets.contains([1], [2])", False),
    ("sets.contains([1], [1, 2])", False),
    ("sets.contains([1], ['1', 1])", False),
    ("sets.contains([1], [1.1, 1u])", False),
    ("sets.equivalent([], [])", True),
    ("sets.equivalent([1], [1, 1])", True),
    ("sets.equivalent([1], [1, 1.0, 1u])", True),
    ("sets.equivalent([1, 2, 3], [3u, 2.0, 1])", True),
    ("sets.equivalent([2, 1], [1])", False),
    ("sets.equivalent([1], [1, 2])", False),
    ("sets.intersects([1], [1])", True),
    ("sets.intersects([1], [1.0, 2])", True),
    ("sets.intersects([[1], [2, 3]], [[1, 2], [2, 3.0]])", True),
    ("sets.intersects([], [])", False),
    ("sets.intersects([1], [])", False),
    ("sets.intersects([1], [2])", False),
    # strings (cel-go ext/strings_test.go)
    ("'tacocat'.charAt(3)", "o"),
    ("'tacocat'.charAt(7)", ""),
    ("'tacocat'.charAt(8)", Error("index out of range: 8")),
    ("'tacocat'.indexOf('')", 0),
    ("'tacocat'.indexOf('ac')", 1),
    ("'tacocat'.indexOf('none')", -1),
    ("'tacocat'.indexOf('a', 3)", 5),
    ("'tacocat'.indexOf('a', 30)", Error("index out of range: 30")),
    ("'ta©o©\u03b1T'.indexOf('©', 3)", 4),
    ("'tacocat'.lastIndexOf('at')", 5),
    ("'tacocat'.lastIndexOf('')", 7),
    ("'tacocat'.lastIndexOf('a', 3)", 1),
    ("'TacoCat'.lowerAscii()", "tacocat"),
    ("'TacoCÆt'.lowerAscii()", "tacocÆt"),
    ("'tacoCat'.upperAscii()", "TACOCAT"),
    ("'hello hello'.replace('he', 'we')", "wello wello"),
    ("'hello hello'.replace('he', 'we', 1)", "wello hello"),
    ("'hello hello'.replace('he', 'we', 0)", "hello hello"),
    ("'hello hello'.split(' ')", ["hello", "hello"]),
    ("'hello hello hello'.split(' ', 2)", ["hello", "hello hello"]),
    ("'hello hello'.split(' ', 0)", []),
    ("'hello'.split('')", ["h", "e", "l", "l", "o"]),
    ("'tacocat'.substring(4)", "cat"),
    ("'tacocat'.substring(0, 4)", "taco"),
    ("'tacocat'.substring(4, 3)", Error("invalid substring range. start: 4, end: 3")),
    ("'tacocat'.substring(40)", Error("index out of range: 40")),
    ("'  \\ttrim\\n   '.trim()", "trim"),
    ("['x', 'y'].join()", "xy"),
    ("['x', 'y'].join('-')", "x-y"),
    ("[].join()", ""),
    ("'gums'.reverse()", "smug"),
    ("'John Smith'.reverse()", "htimS nhoJ"),
    ("strings.quote('first\\nsecond')", '"first\\nsecond"'),
    ('strings.quote("bell\\a")', '"bell\\a"'),
    ("strings.quote('\"quoted\"')", '"\\"quoted\\""'),
    # format (cel-go ext/strings, the verbs Kubernetes has)
    ("'%s and %d'.format(['cpu', 2])", "cpu and 2"),
    ("'%s'.format([1.5])", "1.5"),
    ("'%s'.format([2.0])", "2"),
    ("'%s'.format([1e20])", "1e+20"),
    ("'%s'.format([true])", "true"),
    ("'%s'.format([null])", "null"),
    ("'%s'.format([[1, 'a']])", "[1, a]"),
    ("'%s'.format([{'k': 1}])", "{k: 1}"),
    ("'%d'.format([-7])", "-7"),
    ("'%d'.format([1.5])", Error("decimal clause can only be used on integers")),
    ("'%f'.format([1.0 / 3.0])", "0.333333"),
    ("'%.2f'.format([1.0 / 3.0])", "0.33"),
    ("'%.3e'.format([2.0])", "2.000e+00"),
    ("'%e'.format([1052.032911275])", "1.052033e+03"),
    ("'%b'.format([5])", "101"),
    ("'%o'.format([8])", "10"),
    ("'%x'.format([255])", "ff"),
    ("'%X'.format([255])", "FF"),
    ("'%x'.format(['Hi'])", "4869"),
    ("'%x'.format([-255])", "-ff"),
    ("'100%%'.format([])", "100%"),
    ("'%s %s'.format(['a'])", Error("index 1 out of range")),
    ("'%q'.format(['a'])", Error("unrecognized formatting clause")),
    # optional types
    ("{'a': 1}[?'a'].orValue(3)", 1),
    ("{'a': 1}[?'b'].orValue(3)", 3),
    ("{'a': 1}[?'b'].hasValue()", False),
    ("[1, 2][?1].value()", 2),
    ("[1, 2][?5].hasValue()", False),
    ("{'a': {'b': 1}}.?a.?b.value()", 1),
    ("{'a': {'b': 1}}.?a.?c.orValue(0)", 0),
    ("{'a': {'b': 1}}.?x.?b.hasValue()", False),
    ("optional.of(1).hasValue()", True),
    ("optional.none().hasValue()", False),
    ("optional.none().orValue('default')", "default"),
    ("optional.none().or(optional.of(2)).value()", 2),
    ("optional.of(1).or(optional.of(2)).value()", 1),
    ("optional.ofNonZeroValue(0).hasValue()", False),
    ("optional.ofNonZeroValue('').hasValue()", False),
    ("optional.ofNonZeroValue('x').value()", "x"),
    # cel-go's zero values of a double, a duration and a timestamp (the epoch)
    ("optional.ofNonZeroValue(0.0).hasValue()", False),
    ("optional.ofNonZeroValue(-0.0).hasValue()", False),
    ("optional.ofNonZeroValue(1.5).value()", 1.5),
    ("optional.ofNonZeroValue(duration('0s')).hasValue()", False),
    ("optional.ofNonZeroValue(duration('1s')).hasValue()", True),
    ("optional.ofNonZeroValue(timestamp('1970-01-01T00:00:00Z')).hasValue()", False),
    ("optional.ofNonZeroValue(timestamp('2026-01-01T00:00:00Z')).hasValue()", True),
    ("optional.ofNonZeroValue(false).hasValue()", False),
    ("optional.ofNonZeroValue(0u).hasValue()", False),
    ("optional.none().value()", Error("")),
    ("optional.of(1)", Error("no plain form")),
    ("[?optional.of(1), 2, ?optional.none()]", [1, 2]),
    ("{?'a': optional.none(), 'b': 1}", {"b": 1}),
    ("{'a': [?{'x': 1}[?'y'], ?{'x': 1}[?'x']]}", {"a": [1]}),
    ("{'k': 1, ?'k': optional.of(2)}", Error("duplicate key in map")),
    ("{'a': 1, \"a\": 2}", Refused("duplicate key 'a' in a map literal")),
    ("{1: 'x', 2: 'y', 1: 'z'}", Refused("duplicate key 1 in a map literal")),
    ("{'a': {'b': 1, 'b': 2}}", Refused("duplicate key 'b'")),
    ("{'a': 1, 'b': 1}.size()", 2),
    # two-variable comprehensions
    ("[1, 2, 3].all(i, v, v > i)", True),
    ("[1, 2, 3].exists(i, v, i == 2 && v == 3)", True),
    ("[1, 2, 3].existsOne(i, v, v > 2)", True),
    ("{'a': 1, 'b': 2}.all(k, v, k != '' && v > 0)", True),
    ("{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 2)", True),
    ("[10, 20].transformList(i, v, i + v)", [10, 21]),
    ("[1, 2, 3].transformList(i, v, v > 1, v * 10)", [20, 30]),
    ("sets.equivalent({'a': 1, 'b': 2}.transformList(k, v, k), ['a', 'b'])", True),
    ("{'a': 1, 'b': 2}.transformMap(k, v, v * 10)", {"a": 10, "b": 20}),
    ("{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v * 10)", {"b": 20}),
    ("['x', 'y'].transformMap(i, v, v + string(i))", {0: "x0", 1: "y1"}),
    ("{'a': 1}.transformMapEntry(k, v, {v: k})", {1: "a"}),
    ("[1, 1].transformMapEntry(i, v, {v: i})", Error("already exists")),
    ("{'a': 1}.transformMapEntry(k, v, v < 5, {k: v + 1})", {"a": 2}),
    ("{'a': 1, 'b': 7}.transformMapEntry(k, v, v < 5, {k + 'x': v + 1})", {"ax": 2}),
    ("[1, 2, 3].transformMapEntry(i, v, v > 1, {string(v): i})", {"2": 1, "3": 2}),
    ("[1, 1].transformMapEntry(i, v, true, {v: i})", Error("already exists")),
    # jsonpatch (k8s.io/apiserver/pkg/cel/library/jsonpatch.go)
    ("jsonpatch.escapeKey('k8s.io/my~label')", "k8s.io~1my~0label"),
    ("jsonpatch.escapeKey('no-escaping')", "no-escaping"),
    ("jsonpatch.escapeKey('~/~/')", "~0~1~0~1"),
    ("jsonpatch.escapeKey(1)", Refused("found no matching overload for 'jsonpatch.escapeKey'")),
    ("[[1, 2], [3]].all(i, l, l.all(j, v, v > i + j))", True),
    # timestamp(int): seconds since the epoch, years 0001 to 9999 (a literal outside them is refused at load)
    ("timestamp(0) == timestamp('1970-01-01T00:00:00Z')", True),
    ("timestamp(-62135596800) == timestamp('0001-01-01T00:00:00Z')", True),
    ("timestamp(253402300799) == timestamp('9999-12-31T23:59:59Z')", True),
    ("timestamp(-62135596801)", Refused("invalid timestamp literal: timestamp(-62135596801) out of range")),
    ("timestamp(253402300800)", Refused("invalid timestamp literal")),
    ("timestamp(1 - 62135596802)", Error("timestamp overflow")),
    # cel.bind, and functions only one engine has
    ("cel.bind(x, 'ab', x + x)", "abab"),
    ("cel.bind(x, 2, cel.bind(y, x * 3, y + x))", 8),
    ("math.greatest(1, 2)", Refused("math.greatest: not available on the celpy engine")),
    # quantity and semver share their comparisons
    ("quantity('1Gi').isGreaterThan(quantity('1G'))", True),
    ("semver('1.10.0').isGreaterThan(semver('1.9.0'))", True),
    ("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", True),
    ("semver('1.0.0-alpha.1').compareTo(semver('1.0.0-alpha.beta'))", -1),
    # literals that can never work are load errors (as on a Kubernetes API server)
    ("duration('1x')", Refused("invalid duration literal")),
    ("duration('1h30m') == duration('90m')", True),
    ("timestamp('1000-00-00T00:00:00Z')", Refused("invalid timestamp literal")),
    ("quantity('1K')", Refused("invalid quantity literal")),
    ("ip('nope')", Refused("invalid ip literal")),
    ("cidr('10.0.0.0/33')", Refused("invalid cidr literal")),
    ("semver('v1.0', true) == semver('1.0.0')", True),
    ("ip(dyn('nope'))", Error(_IP_PARSE)),
    # a library call no overload fits, at run time: the same words on both engines
    ("ip(dyn(1))", Error("No matching overloads found : ip(int64)")),
    ("dyn(1).family()", Error("No matching overloads found : (int64).family()")),
    ("'a'.charAt(dyn('x'))", Error("No matching overloads found : (string).charAt(string)")),
]
