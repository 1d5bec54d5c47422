"""Literal arguments that can never work, found at load time as Kubernetes finds them.

`matches('(')`, `duration('1x')` or `timestamp('1000-00-00T00:00:00Z')` type-check, and would then fail
on every node at run time — with the default `failurePolicy: Fail`, every node rejected. Kubernetes
compiles such constant arguments when a policy is written; here every engine's `compile` does it, on
the expression's syntax tree (not its text), and the error names the argument's position.

Checked: the pattern of `matches`, `find` and `findAll` (RE2, as at run time), the argument of
`duration`, `timestamp` and `quantity`/`isQuantity`'s cousin `quantity`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator
from typing import Any

import lark
from celpy.evaluation import celstr

from rulesched.rules.cel import CelCompileError
from rulesched.rules.cel.analysis import syntax_tree
from rulesched.rules.cel.library import RegexError, regex
from rulesched.rules.quantity import QuantityError, parse_quantity

_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NANOS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_MAX_DURATION_SECONDS = 315_576_000_000
"""CEL's duration range: ±10,000 years, in seconds (google.protobuf.Duration's)."""


def _regex(text: str) -> None:
    try:
        regex(text)
    except RegexError as error:
        raise ValueError(str(error)) from None


def _duration(text: str) -> None:
    """A Go duration string, as CEL's `duration()` accepts it: "1h30m", "1.5s", "-300ms", "0"."""
    if not _DURATION.fullmatch(text):
        raise ValueError(f"invalid duration {text!r}: a number and a unit (h, m, s, ms, us, ns), like '1h30m'")
    nanos = sum(float(number) * _NANOS[unit] for number, unit in _DURATION_PART.findall(text))
    if nanos / 10**9 > _MAX_DURATION_SECONDS:
        raise ValueError(f"duration {text!r} is out of range (at most 10,000 years)")


def _timestamp(text: str) -> None:
    """An RFC 3339 timestamp between years 1 and 9999, as CEL's `timestamp()` accepts it."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", text):
        raise ValueError(f"invalid timestamp {text!r}: RFC 3339, like '2024-01-02T15:04:05Z'")
    try:
        datetime.datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError as error:
        raise ValueError(f"invalid timestamp {text!r}: {error}") from None


def _quantity(text: str) -> None:
    try:
        parse_quantity(text)
    except QuantityError as error:
        raise ValueError(str(error)) from None


CHECKS: dict[str, tuple[int, Callable[[str], None]]] = {
    "matches": (0, _regex),
    "find": (0, _regex),
    "findAll": (0, _regex),
    "duration": (0, _duration),
    "timestamp": (0, _timestamp),
    "quantity": (0, _quantity),
}
"""Function name → (which argument, counted after the receiver of a member call, and how to check it)."""


def check_literals(source: str) -> None:
    """Raise `CelCompileError` (with the literal's position) for the first constant argument of a
    checked function that can never work; nothing when the expression cannot be parsed (the engine's
    own compile reports that)."""
    tree = syntax_tree(source)
    if tree is None:
        return
    errors = []
    for name, arguments in _calls(tree):
        index, check = CHECKS[name]
        token = _string_literal(arguments[index]) if index < len(arguments) else None
        if token is None:
            continue
        try:
            check(str(celstr(token)))
        except ValueError as error:
            errors.append(CelCompileError(f"{name}(): {error}", token.line, token.column))
    if errors:
        raise min(errors, key=lambda e: (e.line or 0, e.column or 0))


def _calls(tree: lark.Tree[Any]) -> Iterator[tuple[str, list[Any]]]:
    """(function name, argument expressions) of every call to a checked function, global
    (`duration('1s')`, `matches(s, 'a')`) or member (`s.matches('a')`, arguments after the receiver)."""
    for node in tree.iter_subtrees():
        if node.data == "ident_arg":
            name, arguments = str(node.children[0]), _arguments(node.children[1:])
            if name in ("matches", "find", "findAll") and arguments:
                arguments = arguments[1:]  # the global form's first argument is the text
        elif node.data == "member_dot_arg":
            name, arguments = str(node.children[1]), _arguments(node.children[2:])
        else:
            continue
        if name in CHECKS:
            yield name, arguments


def _arguments(children: list[Any]) -> list[Any]:
    exprlist = next((c for c in children if isinstance(c, lark.Tree) and c.data == "exprlist"), None)
    return list(exprlist.children) if exprlist is not None else []


def _string_literal(node: Any) -> lark.Token | None:
    """The string literal token an argument expression consists of, if that is all it is."""
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, lark.Token) and node.type in ("STRING_LIT", "MLSTRING_LIT"):
        return node
    return None
