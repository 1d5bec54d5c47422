"""Load-time checks of the rulesched CEL dialect, made on the syntax tree (`analysis.syntax_tree`).

Kubernetes refuses at compile time a literal argument that can never work; so does rulesched, for the
same functions: a regular expression (`matches`, `find`, `findAll`) that RE2 refuses, and a string
literal given to `duration`, `timestamp`, `quantity`, `ip`, `cidr`, `url` or `semver` that does not
parse. The error carries the literal's position. A function only one engine has (`math.*`, cel-cpp's
math extension) is refused on both, naming the engine that lacks it, so that a rule loads alike on
either engine (docs/rules/functions.md).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any, cast

import lark

from rulesched.rules.cel.analysis import syntax_tree
from rulesched.rules.cel.base import CelCompileError
from rulesched.rules.cel.libs import cidr, ip, quantity, regex, semver, urls
from rulesched.rules.cel.libs.times import check_duration, check_timestamp

ONE_ENGINE_NAMESPACES: dict[str, str] = {"math": "celpy"}
"""Namespaces of functions only one engine has, and the engine that lacks them."""

_WRAPPERS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member", "primary"}
)


_ONE_STRING: dict[str, Callable[[str], object]] = {
    "duration": check_duration,
    "timestamp": check_timestamp,
    "quantity": quantity.quantity,
    "ip": ip.ip,
    "cidr": cidr.cidr,
    "url": urls.url,
    "semver": semver.semver,
}
"""Global functions whose (first) string literal argument is checked, and how."""
_REGEX_METHODS = frozenset({"matches", "find", "findAll"})


def check(source: str) -> None:
    """Raise `CelCompileError` for the first literal argument of `source` that can never work, or a
    function only one engine has."""
    tree = syntax_tree(source)
    if tree is None:
        return
    found = [problem for node in tree.iter_subtrees() for problem in _problems(node)]
    if found:
        message, token = min(found, key=lambda problem: (problem[1].line or 0, problem[1].column or 0))
        raise CelCompileError(message, token.line, token.column)


def _problems(node: lark.Tree[Any]) -> Iterator[tuple[str, lark.Token]]:
    if node.data == "ident_arg":
        name, args = str(node.children[0]), _arguments(node)
        if name == "matches" and len(args) == 2:
            yield from _checked(args[1], "regular expression", regex.compiled)
        elif name == "semver" and len(args) == 2 and _bool(args[1]) is True:
            yield from _checked(args[0], "semver", semver.normalized)
        elif name in _ONE_STRING and len(args) == 1:
            yield from _checked(args[0], name, _ONE_STRING[name])
    elif node.data == "member_dot_arg":
        name, args, namespace = str(node.children[1]), _arguments(node), _bare_ident(node.children[0])
        if name in _REGEX_METHODS and args:
            yield from _checked(args[0], "regular expression", regex.compiled)
        if namespace in ONE_ENGINE_NAMESPACES:
            lacking = ONE_ENGINE_NAMESPACES[namespace]
            yield (
                f"{namespace}.{name}: not available on the {lacking} engine; a rule may use only functions"
                " both engines have (docs/rules/functions.md)",
                cast(lark.Token, node.children[1]),
            )


def _checked(argument: lark.Tree[Any], what: str, parse: Callable[[str], object]) -> Iterator[tuple[str, lark.Token]]:
    found = _string_literal(argument)
    if found is None:
        return
    token, text = found
    try:
        parse(text)
    except ValueError as error:
        yield f"invalid {what} literal {text!r}: {error}", token


def _arguments(call: lark.Tree[Any]) -> list[lark.Tree[Any]]:
    lists = [c for c in call.children if isinstance(c, lark.Tree) and c.data == "exprlist"]
    return [c for c in lists[0].children if isinstance(c, lark.Tree)] if lists else []


def _unwrapped(node: Any) -> Any:
    while isinstance(node, lark.Tree) and node.data in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    return node


def _bare_ident(node: Any) -> str | None:
    node = _unwrapped(node)
    return str(node.children[0]) if isinstance(node, lark.Tree) and node.data == "ident" else None


def _bool(node: Any) -> bool | None:
    node = _unwrapped(node)
    if isinstance(node, lark.Tree) and node.data == "literal" and str(node.children[0]) in ("true", "false"):
        return str(node.children[0]) == "true"
    return None


def _string_literal(node: Any) -> tuple[lark.Token, str] | None:
    """The token and value of a string literal argument; None for anything else (or an escape this
    reading does not know, which is then left to the engine)."""
    node = _unwrapped(node)
    if not (isinstance(node, lark.Tree) and node.data == "literal"):
        return None
    token = node.children[0]
    if not isinstance(token, lark.Token) or token.type not in ("STRING_LIT", "MLSTRING_LIT"):
        return None
    text = str(token)
    raw = text[:1] in "rR"
    body = text[1:] if raw else text
    quote = 3 if body[:3] in ('"""', "'''") else 1
    inner = body[quote:-quote]
    if raw or "\\" not in inner:
        return token, inner
    try:
        value = ast.literal_eval(body.replace("\\?", "?").replace("\\`", "`"))
    except (ValueError, SyntaxError):
        return None
    return (token, value) if isinstance(value, str) else None
