"""Kubernetes' format library (k8s.io/apiserver/pkg/cel/library/format.go): named validators of the
Kubernetes API's string formats, `format.dns1123Label().validate('my-name')`.

A format is carried as its name (`format.named('uuid').value() == format.uuid()`). `validate` gives
`optional.none()` for a valid string, else an optional list of the reasons, in apimachinery's words;
`format.named(n)` and `validate` are compiled as calls of `rulesched_format_errors` and
`rulesched_is_format` (`rules.cel.rewrite`), since only CEL itself can build an optional.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from collections.abc import Callable

from rulesched.rules.cel.library import LibraryError, Overload, global_
from rulesched.rules.cel.libs import urls
from rulesched.rules.cel.libs.times import check_timestamp

ERRORS, IS_FORMAT = "rulesched_format_errors", "rulesched_is_format"

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + r"(\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE = "(" + _NAME + ")?"
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")

LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and"
    f" end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{_LABEL}')"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must"
    " start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is"
    f" '{_SUBDOMAIN}')"
)
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic"
    " character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for"
    f" validation is '{_DNS1035}')"
)
NAME_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric"
    f" character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{_NAME}')"
)
VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must"
    " start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used"
    f" for validation is '{_VALUE}')"
)


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def _matching(pattern: str, limit: int, message: str) -> Callable[[str], list[str]]:
    compiled = re.compile(pattern)

    def validate(text: str) -> list[str]:
        errors = [_too_long(limit)] if len(text) > limit else []
        return errors if compiled.fullmatch(text) else [*errors, message]

    return validate


dns1123_label = _matching(_LABEL, 63, LABEL_MESSAGE)
dns1123_subdomain = _matching(_SUBDOMAIN, 253, SUBDOMAIN_MESSAGE)
dns1035_label = _matching(_DNS1035, 63, DNS1035_MESSAGE)
label_value = _matching(_VALUE, 63, VALUE_MESSAGE)


def _prefix(validate: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A prefix of a generated name may end with '-' (apimachinery's `maskTrailingDash`)."""
    return lambda text: validate(text[:-1] + "a" if len(text) > 1 and text.endswith("-") else text)


def qualified_name(text: str) -> list[str]:
    parts = text.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {NAME_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    errors: list[str] = []
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {m}" for m in dns1123_subdomain(parts[0])]
    if not name:
        return [*errors, "name part must be non-empty"]
    if len(name) > 63:
        errors.append(f"name part {_too_long(63)}")
    if not re.fullmatch(_NAME, name):
        errors.append(f"name part {NAME_MESSAGE}")
    return errors


def _uri(text: str) -> list[str]:
    return [] if urls.is_url(text) else ["invalid URI"]


def _uuid(text: str) -> list[str]:
    return [] if _UUID.fullmatch(text) else ["does not match the UUID format"]


def _byte(text: str) -> list[str]:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(text: str) -> list[str]:
    try:
        datetime.datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        return ["invalid date"]
    return [] if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else ["invalid date"]


def _datetime(text: str) -> list[str]:
    try:
        check_timestamp(text)
    except ValueError:
        return ["invalid datetime"]
    return []


FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns1123_label,
    "dns1123Subdomain": dns1123_subdomain,
    "dns1035Label": dns1035_label,
    "qualifiedName": qualified_name,
    "dns1123LabelPrefix": _prefix(dns1123_label),
    "dns1123SubdomainPrefix": _prefix(dns1123_subdomain),
    "dns1035LabelPrefix": _prefix(dns1035_label),
    "labelValue": label_value,
    "uri": _uri,
    "uuid": _uuid,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


def errors(name: str, text: str) -> list[str]:
    if name not in FORMATS:
        raise LibraryError(f"unknown format {name!r}")
    return FORMATS[name](text)


def _constant(name: str) -> Callable[[], str]:
    return lambda: name


OVERLOADS: tuple[Overload, ...] = (
    *(global_(f"format.{name}", (), "string", _constant(name)) for name in FORMATS),
    global_(ERRORS, ("string", "string"), "list", errors),
    global_(IS_FORMAT, ("string",), "bool", lambda name: name in FORMATS),
)
