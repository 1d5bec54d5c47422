"""Load-time checks of the rulesched CEL dialect, made on the syntax tree (`analysis.syntax_tree`).

Kubernetes refuses at compile time a literal argument that can never work; so does rulesched, for the
same functions: a regular expression (`matches`, `find`, `findAll`) that RE2 refuses, and a string
literal given to `duration`, `timestamp`, `quantity`, `ip`, `cidr`, `url` or `semver` that does not
parse, or an integer given to `timestamp` outside years 0001 to 9999. The error carries the literal's
position; so does a map literal with a key twice, and `sum`, `min`, `max` of a literal list of a
type they do not take (`['a'].sum()`). A function only one engine has (`math.*`, cel-cpp's
math extension) is refused on both, naming the engine that lacks it, so that a rule loads alike on
either engine (docs/rules/functions.md). `has()` of a context name (`has(metrics)`) is `true`
(`rewrite.presence_of_names`); of any other bare name (a comprehension variable, a typo) it is refused
as CEL refuses it, with what to write instead: `has()` tests a field of a map or message.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Any, cast

import lark

from rulesched.rules.cel.analysis import syntax_tree
from rulesched.rules.cel.base import CelCompileError
from rulesched.rules.cel.libs import cidr, ip, quantity, regex, semver, urls
from rulesched.rules.cel.libs.times import check_duration, check_timestamp, check_unix_seconds
from rulesched.rules.cel.rewrite import presence_of_names
from rulesched.rules.vocabulary import CONTEXT_NAMES

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


MAX_NESTING = 32
"""How deep CEL lets an expression nest (cel-cpp's parser and checker, as Kubernetes' cel-go): each bracket,
call argument list and operand is a level."""
_TRIPLES = ("'''", '"""')


def nesting_error(source: str) -> CelCompileError:
    """The error of an expression nested too deep, at its deepest bracket."""
    _, line, column = deepest_bracket(source)
    text = (
        f"nested deeper than CEL allows ({MAX_NESTING} levels: each bracket, call and operand is one): "
        "split the expression, or name its parts with rule set variables"
    )
    return CelCompileError(text, line, column)


def deepest_bracket(source: str) -> tuple[int, int, int]:
    """How deep brackets nest in `source` (string literals aside), and the line and column (1-based) of the
    first opening bracket at that depth, or past the limit (the first at depth `MAX_NESTING + 1`)."""
    depth = deepest = 0
    where, line, start, quote, index = (1, 1), 1, 0, "", 0
    while index < len(source):
        char = source[index]
        if quote:
            if char == "\\":
                index += 1
            elif source.startswith(quote, index):
                index, quote = index + len(quote) - 1, ""
        elif char in "'\"":
            quote = source[index : index + 3] if source[index : index + 3] in _TRIPLES else char
            index += len(quote) - 1
        elif char in "([{":
            depth += 1
            if depth > deepest and deepest <= MAX_NESTING:
                deepest, where = depth, (line, index - start + 1)
        elif char in ")]}":
            depth -= 1
        if char == "\n":
            line, start = line + 1, index + 1
        index += 1
    return deepest, *where


def check(source: str) -> None:
    """Raise `CelCompileError` for an expression nested deeper than CEL allows (before parsing it: the
    engine's own error has no position), the first literal argument of `source` that can never work, or a
    function only one engine has."""
    if deepest_bracket(source)[0] > MAX_NESTING:
        raise nesting_error(source)
    tree = syntax_tree(source)
    if tree is None:
        return
    found = [problem for node in tree.iter_subtrees() for problem in _problems(node)]
    found += [(_bare_has(str(token)), token) for _, token, known in presence_of_names(tree) if not known]
    found += [problem for node in tree.find_data("map_lit") for problem in _duplicate_keys(source, node)]
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
            if name == "timestamp":
                yield from _checked_seconds(args[0])
    elif node.data == "member_dot_arg":
        name, args, namespace = str(node.children[1]), _arguments(node), _bare_ident(node.children[0])
        if name in _NOT_FOR and not args:
            yield from _not_for(name, node)
        if name in _REGEX_METHODS and args:
            yield from _checked(args[0], "regular expression", regex.compiled)
        if namespace in ONE_ENGINE_NAMESPACES:
            lacking = ONE_ENGINE_NAMESPACES[namespace]
            yield (
                f"{namespace}.{name}: not available on the {lacking} engine; a rule may use only functions"
                " both engines have (docs/rules/functions.md)",
                cast(lark.Token, node.children[1]),
            )


def _bare_has(name: str) -> str:
    what = "a local variable here" if name in CONTEXT_NAMES else "not a context name"
    return (
        f"has({name}): has() tests whether a map or message has a field, as in has({name}.field); {name} is"
        f" {what} (only a context name may be tested whole: has(metrics)), so test a field of it or drop the"
        " test (docs/rules/language.md)"
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


def _duplicate_keys(source: str, literal: lark.Tree[Any]) -> Iterator[tuple[str, lark.Token]]:
    """A map literal with one key twice (`{'a': 1, 'a': 2}`), which Kubernetes refuses at compile time. An
    optional entry (`?'a': o`) may hold nothing, so a repeat there is left to the evaluation."""
    lists = [c for c in literal.children if isinstance(c, lark.Tree)]
    items = [c for c in lists[0].children if isinstance(c, lark.Tree)] if lists else []
    seen: set[tuple[str, object]] = set()
    before = literal.meta.start_pos + 1
    for key, value in zip(items[0::2], items[1::2], strict=True):
        optional = "?" in source[before : key.meta.start_pos]  # the grammar keeps no `?` in the tree
        before = value.meta.end_pos
        found = _key(key)
        if found is None or optional:
            continue
        identity, token = found
        if identity in seen:
            shown = repr(identity[1]) if identity[0] == "string" else str(token)
            yield f"duplicate key {shown} in a map literal", token
        seen.add(identity)


def _key(node: Any) -> tuple[tuple[str, object], lark.Token] | None:
    """A literal map key, as what it equals (a string by its value, an int or a bool by its text)."""
    found = _string_literal(node)
    if found is not None:
        return ("string", found[1]), found[0]
    node = _unwrapped(node)
    token = node.children[0] if isinstance(node, lark.Tree) and node.data in ("literal", "ident") else None
    if not isinstance(token, lark.Token):
        return None
    if token.type == "INT_LIT" or (node.data == "ident" and str(token) in ("true", "false")):  # `true`: an ident
        return (node.data, str(token)), token
    return None


_LITERAL_TYPES = {
    "INT_LIT": "int",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "STRING_LIT": "string",
    "MLSTRING_LIT": "string",
    "BYTES_LIT": "bytes",
}
_NOT_FOR = {"sum": {"string", "bytes", "bool", "list", "map"}, "min": {"list", "map"}, "max": {"list", "map"}}
"""Lists functions, and the element types Kubernetes refuses them for (lists.go: sum adds numbers and
durations, min and max compare)."""


def _literal_type(node: Any) -> str | None:
    """The CEL type of a literal (`[1]` is a list, `true` a bool); None for anything else, whose type only
    a checker knows, and for `null`."""
    node = _unwrapped(node)
    if not isinstance(node, lark.Tree) or not node.children:
        return None
    first = node.children[0]
    if node.data == "literal" and isinstance(first, lark.Token):
        return _LITERAL_TYPES.get(first.type)
    if node.data == "ident" and str(first) in ("true", "false"):
        return "bool"
    return node.data.removesuffix("_lit") if node.data in ("list_lit", "map_lit") else None


def _not_for(name: str, call: lark.Tree[Any]) -> Iterator[tuple[str, lark.Token]]:
    """`['a'].sum()`, `[[1]].min()`: a lists function on a literal list of a type it does not take."""
    receiver = _unwrapped(call.children[0])
    if not (isinstance(receiver, lark.Tree) and receiver.data == "list_lit"):
        return
    items = [c for part in receiver.children if isinstance(part, lark.Tree) for c in part.children]
    refused = [kind for kind in map(_literal_type, items) if kind in _NOT_FOR[name]]
    if refused:
        message = f"found no matching overload for '{name}' applied to 'list({refused[0]})'"
        yield message, cast(lark.Token, call.children[1])


def _checked_seconds(argument: lark.Tree[Any]) -> Iterator[tuple[str, lark.Token]]:
    """`timestamp(<int literal>)` outside years 0001 to 9999, which Kubernetes refuses too."""
    node = _unwrapped(argument)
    token = node.children[0] if isinstance(node, lark.Tree) and node.data == "literal" else None
    if isinstance(token, lark.Token) and token.type == "INT_LIT" and not str(token).lower().startswith(("0x", "-0x")):
        try:
            check_unix_seconds(int(str(token)))
        except ValueError as error:
            yield f"invalid timestamp literal: {error}", token


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
