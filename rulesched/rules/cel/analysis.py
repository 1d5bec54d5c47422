"""What an expression reads, from its syntax tree: the context names, the variables, the field paths.

The expression is parsed with the CEL grammar (cel-python's, a LALR parser; extended here with the
optional syntax `x.?f`, `m[?k]`, `[?x]` and `{?k: v}` that the cpp engine accepts, so one parser serves both engines).
Every identifier that is a context name (`pod`, `node`, ...) is a read; from it, the selections applied
to it (`.field`, `['key']`) give the field path it reads, and what surrounds it may narrow that path
to a key (`'zone' in labels`) or to a field's presence (`has(node.spec.taints)`); `has(metrics)` reads
nothing, as it is `true`.

The answer is conservative: a comprehension variable that shadows a context name (`exists(node, …)`)
counts as a read, and an expression the grammar cannot parse reads every name whole (its compilation
then reports the error, or a syntax only one engine has loses its caching). Over-reporting only costs
caching opportunities; under-reporting would be a bug, which `tests/rules/test_analysis.py` looks for by
evaluating expressions on values trimmed to the paths found.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path as FilePath
from typing import Any

import lark

from rulesched.rules.vocabulary import CONTEXT_NAMES

Path = tuple[str, ...]
"""Field names from a context value down; the empty path is the whole value."""

PRESENT = "\x00"
"""A field name no object has: a path ending with it reads only whether its parent field is present
(`has(node.metadata.labels)`), so trimming keeps the parent (a map) but none of its entries. It is not a
field: what names the fields a path selects reads them through `fields`."""

_IDENTIFIERS = frozenset({"ident", "dot_ident", "ident_arg", "dot_ident_arg"})
_PASS_THROUGH = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member", "primary"}
)
"""Grammar levels that, with a single child, only wrap it (precedence climbing)."""
_SIMPLE_STRING = re.compile(r"'([^'\\\n]*)'|\"([^\"\\\n]*)\"")
"""A string literal token without prefix or escape, whose value is its text between the quotes."""
_OPTIONAL_SYNTAX = (
    ('member_dot     : member "." IDENT', 'member_dot     : member "." ["?"] IDENT'),
    ('member_index   : member "[" expr "]"', 'member_index   : member "[" ["?"] expr "]"'),
    ('exprlist       : expr ("," expr)*', 'exprlist       : ["?"] expr ("," ["?"] expr)*'),
    (
        'mapinits       : expr ":" expr ("," expr ":" expr)*',
        'mapinits       : ["?"] expr ":" expr ("," ["?"] expr ":" expr)*',
    ),
)


@dataclass(frozen=True, slots=True)
class Reads:
    """The context names an expression reads, and the rule set variables it names."""

    names: frozenset[str]
    variables: tuple[str, ...]


def reads(source: str) -> Reads:
    """What `source` reads; variable names are in order of first appearance."""
    tree = _parse(source)
    if tree is None:
        return Reads(names=frozenset(CONTEXT_NAMES), variables=())
    found = list(_Tree(tree).context_reads())
    names = frozenset(name for name, _, _ in found)
    variables = [path[0] for name, path, _ in sorted(found, key=lambda f: f[2]) if name == "variables" and path]
    return Reads(names=names, variables=tuple(dict.fromkeys(variables)))


def paths(source: str) -> dict[str, frozenset[Path]]:
    """For each context name `source` reads, the field paths it selects (`pod.metadata.labels` →
    ("metadata", "labels")). A string-literal index (`labels['zone']`) or membership test
    (`'zone' in labels`) selects that key, `has(x.y)` only the presence of `y`; anything else (another
    index, a method call, the bare name) ends the path there, so the value at a path is always enough to
    evaluate the expression."""
    tree = _parse(source)
    if tree is None:
        return {name: frozenset({()}) for name in CONTEXT_NAMES}
    found: dict[str, set[Path]] = {}
    for name, path, _ in _Tree(tree).context_reads():
        found.setdefault(name, set()).add(path)
    return {name: frozenset(selected) for name, selected in found.items()}


def fields(path: Path) -> Path:
    """The fields `path` selects, without the presence test: `has(metrics.custom)` reads whether `metrics`
    has `custom` (the path `("custom", PRESENT)`), which names `custom` and no field of it."""
    return path[:-1] if path and path[-1] == PRESENT else path


def paths_of(sources: Iterable[str]) -> dict[str, frozenset[Path]]:
    """The paths of several expressions read together (a rule and its message, the variables it uses)."""
    found: dict[str, frozenset[Path]] = {}
    for source in sources:
        if source.strip():
            for name, selected in paths(source).items():
                found[name] = found.get(name, frozenset()) | selected
    return found


@cache
def _parser() -> lark.Lark:
    """cel-python's CEL grammar with the optional syntax added, as a LALR parser (built once)."""
    # Found without importing celpy (its runtime is not needed to parse, and the cpp engine never loads it).
    spec = importlib.util.find_spec("celpy")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("cel-python is not installed: its CEL grammar is needed to analyse expressions")
    grammar = (FilePath(spec.submodule_search_locations[0]) / "cel.lark").read_text()
    for rule, extended in _OPTIONAL_SYNTAX:
        if rule not in grammar:
            raise RuntimeError(f"cel-python's grammar changed: {rule!r} not found")
        grammar = grammar.replace(rule, extended)
    return lark.Lark(grammar, parser="lalr", start="expr", maybe_placeholders=False, propagate_positions=True)


def _parse(source: str) -> lark.Tree[Any] | None:
    try:
        return _parser().parse(source)
    except lark.exceptions.LarkError:
        return None


def syntax_tree(source: str) -> lark.Tree[Any] | None:
    """The parse tree of `source` (with positions), or None when the grammar cannot parse it."""
    return _parse(source)


_COMPARISONS = frozenset({"relation_lt", "relation_le", "relation_gt", "relation_ge", "relation_eq", "relation_ne"})


def numbers_compared_as_dyn(source: str) -> str:
    """`source` with both operands of every comparison wrapped in `dyn(…)`, so that a type checker
    without cross-type numeric comparisons accepts `1 < 1.5` as Kubernetes CEL does (the value is
    unchanged: `dyn` only hides the static type). `source` itself when it cannot be parsed."""
    tree = _parse(source)
    if tree is None:
        return source
    spans: list[tuple[int, int]] = []
    for node in tree.iter_subtrees():
        comparison = len(node.children) == 2 and getattr(node.children[0], "data", "") in _COMPARISONS
        if node.data == "relation" and comparison:
            left, right = node.children[0].children[0], node.children[1]
            spans += [(left.meta.start_pos, left.meta.end_pos), (right.meta.start_pos, right.meta.end_pos)]
    inserts = sorted([(start, "dyn(") for start, _ in spans] + [(end, ")") for _, end in spans], key=lambda i: i[0])
    text = source
    for position, piece in reversed(inserts):
        text = text[:position] + piece + text[position:]
    return text


class _Tree:
    """A parsed expression with each node's parent, to walk up from an identifier."""

    def __init__(self, root: lark.Tree[Any]) -> None:
        self.root = root
        self.parents: dict[int, lark.Tree[Any]] = {}
        for node in root.iter_subtrees():
            for child in node.children:
                if isinstance(child, lark.Tree):
                    self.parents[id(child)] = node

    def parent(self, node: lark.Tree[Any]) -> lark.Tree[Any] | None:
        return self.parents.get(id(node))

    def context_reads(self) -> Iterator[tuple[str, Path, int]]:
        """(context name, field path, position) for every identifier naming a context value."""
        for node in self.root.iter_subtrees():
            if node.data in _IDENTIFIERS and str(node.children[0]) in CONTEXT_NAMES:
                token = node.children[0]
                whole = node.data.endswith("_arg")  # `node(…)`: not a value, but count it, whole
                if not whole and self.narrowed(node) == (PRESENT,):
                    continue  # `has(metrics)`: `true`, reading nothing (rewrite.presence_of_names)
                position = token.start_pos if isinstance(token, lark.Token) else None
                yield str(token), () if whole else self.path(node), position or 0

    def path(self, identifier: lark.Tree[Any]) -> Path:
        """The field path selected from `identifier`, narrowed by what surrounds the selection."""
        fields: list[str] = []
        current = identifier
        while (parent := self.parent(current)) is not None and parent.children[0] is current:
            if parent.data in ("primary", "member") and len(parent.children) == 1:
                current = parent
            elif parent.data == "member_dot":
                fields.append(str(parent.children[1]))
                current = parent
            elif parent.data == "member_index":
                key = string_literal(parent.children[1])
                return (*fields, key) if key is not None else tuple(fields)
            elif parent.data == "member_dot_arg":
                return tuple(fields)  # `node.metadata.size()`: a method of the value, not a field
            else:
                break
        return (*fields, *self.narrowed(current)) if fields else ()

    def narrowed(self, selection: lark.Tree[Any]) -> Path:
        """The key a selection is narrowed to: the left of `'k' in selection`, or `has(selection)`."""
        operand = self.unwrapped_up(selection)
        parent = self.parent(operand)
        if parent is None:
            return ()
        if parent.data == "relation" and len(parent.children) == 2 and parent.children[1] is operand:
            test = parent.children[0]
            is_in = isinstance(test, lark.Tree) and test.data == "relation_in"
            key = string_literal(test.children[0]) if is_in else None
            return (key,) if key is not None else ()
        calls = self.parent(parent)
        if parent.data == "exprlist" and len(parent.children) == 1 and calls is not None and _is_has(calls):
            return (PRESENT,)
        return ()

    def unwrapped_up(self, node: lark.Tree[Any]) -> lark.Tree[Any]:
        """The highest ancestor of `node` that only wraps it (single children all the way down)."""
        while (parent := self.parent(node)) is not None and parent.data in _PASS_THROUGH and len(parent.children) == 1:
            node = parent
        return node


def arguments(call: lark.Tree[Any]) -> list[lark.Tree[Any]]:
    """The argument expressions of a call node (`f(a, b)`, `x.f(a, b)`)."""
    lists = [c for c in call.children if isinstance(c, lark.Tree) and c.data == "exprlist"]
    return [c for c in lists[0].children if isinstance(c, lark.Tree)] if lists else []


def bare_ident(node: Any) -> str | None:
    """The name `node` is, if it only wraps a bare identifier (`x`, `(x)`)."""
    while isinstance(node, lark.Tree) and node.data in _PASS_THROUGH and len(node.children) == 1:
        node = node.children[0]
    return str(node.children[0]) if isinstance(node, lark.Tree) and node.data == "ident" else None


def _is_has(call: lark.Tree[Any]) -> bool:
    return call.data == "ident_arg" and str(call.children[0]) == "has"


def string_literal(node: Any) -> str | None:
    """The value of `node` if it is (only wraps) a simple string literal."""
    while isinstance(node, lark.Tree) and node.data in _PASS_THROUGH and len(node.children) == 1:
        node = node.children[0]
    if not (isinstance(node, lark.Tree) and node.data == "literal"):
        return None
    simple = _SIMPLE_STRING.fullmatch(str(node.children[0]))
    if simple is None:
        return None
    key = simple[1] if simple[1] is not None else simple[2]
    return None if PRESENT in key else key  # a key holding the marker would read as a presence test
