"""Source rewrites on the syntax tree, for what an engine cannot parse or resolve itself.

Each rewrite is exact (the same value and the same errors) and is made from the parse tree of
`analysis` (positions of its nodes), never from patterns over the text:
- for both engines, `l.min()`, `l.max()` and `l.sum()` (libs/lists.py), Kubernetes' format library
  (libs/formats.py), and two-variable comprehensions (`m.all(k, v, p)`, `exists`, `existsOne`,
  `transformList`, `transformMap`, `transformMapEntry`), which neither engine has, become
  one-variable ones over `rulesched_keys(…)` (libs/comprehensions.py); and `has(<context name>)`
  (`has(metrics)`) → `true`, a rulesched extension to CEL (which refuses `has()` of a bare name): the
  context names are always defined in a rule's activation (`presence_of_names`);
- for celpy, namespaced library functions (`sets.contains(…)` → `sets__contains(…)`), a member
  function that has a global twin (`cidr(c).ip()` → `.ip__member()`), `cel.bind(x, i, e)` →
  `[i].map(x, e)[0]`, and the optional syntax (`m[?k]`, `x.?f`, `[?o]`, `{?k: o}`) →
  `optional__index(m, k)`, `optional__field(x, 'f')`, `optional__list(…)`, `optional__map(…)`;
  and `has(e.f)` → `has__field(e, 'f')`, which is an error when `e` is (celpy's own `has()` is false
  whenever `e.f` is an error, so `has(metrics.cpu.usage)` without `metrics.cpu` was false on celpy
  and an error on cel-cpp, cel-go and Kubernetes).
An expression the grammar cannot parse is left as it is: its compilation reports the error.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import lark

from rulesched.rules.cel.analysis import arguments as _arguments
from rulesched.rules.cel.analysis import bare_ident as _bare_ident
from rulesched.rules.cel.analysis import syntax_tree
from rulesched.rules.cel.libs import OVERLOADS
from rulesched.rules.cel.libs.comprehensions import ENTRIES, KEYS, ZIP
from rulesched.rules.cel.libs.formats import ERRORS, IS_FORMAT
from rulesched.rules.cel.libs.lists import ARGMAX, ARGMIN, SUM, SUM_IS_DURATION, SUM_NANOS
from rulesched.rules.vocabulary import CONTEXT_NAMES

NAMESPACED = frozenset(o.function for o in OVERLOADS if "." in o.function) | frozenset(
    {"optional.of", "optional.none", "optional.ofNonZeroValue"}
)
"""Namespaced functions celpy gets under a plain name (`celpy_name`)."""
TWINS = frozenset(o.function for o in OVERLOADS if o.member) & frozenset(o.function for o in OVERLOADS if not o.member)
"""Functions with a member and a global overload of the same types (`ip`), which celpy cannot tell apart."""
_WRAPPERS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member", "primary"}
)
_TWO_VARIABLE = frozenset(
    {"all", "exists", "existsOne", "exists_one", "transformList", "transformMap", "transformMapEntry"}
)
_ONE_VARIABLE = frozenset({"map", "filter", "optMap", "optFlatMap"})


def celpy_name(function: str, member: bool = False) -> str:
    """The name celpy knows a library function by."""
    name = function.replace(".", "__")
    return f"{name}__member" if member and function in TWINS else name


@dataclass(frozen=True, slots=True, order=True)
class _Edit:
    start: int
    end: int
    depth: int
    text: str


def _apply(source: str, edits: list[_Edit]) -> str:
    out: list[str] = []
    position = 0
    for edit in sorted(edits):
        out.append(source[position : edit.start])
        out.append(edit.text)
        position = edit.end
    out.append(source[position:])
    return "".join(out)


def _walk(tree: lark.Tree[Any]) -> Iterator[tuple[lark.Tree[Any], int]]:
    """Every node with its depth, without recursion (a long `a + b + …` is a deep tree)."""
    pending = [(tree, 0)]
    while pending:
        node, depth = pending.pop()
        yield node, depth
        pending.extend((child, depth + 1) for child in reversed(node.children) if isinstance(child, lark.Tree))


def rewritten(source: str) -> str:
    """`source` with its two-variable comprehensions made one-variable and the other rewrites for both
    engines made (the module's docstring)."""
    tree = syntax_tree(source)
    if tree is None:
        return source
    counter = itertools.count()
    edits = [_Edit(c.meta.start_pos, c.meta.end_pos, 0, "true") for c, _, known in presence_of_names(tree) if known]
    for node, depth in _walk(tree):
        if node.data == "member_dot_arg" and str(node.children[1]) in _TWO_VARIABLE:
            edits += _two_variable(node, depth, next(counter))
        elif node.data == "member_dot_arg" and str(node.children[1]) in ("min", "max") and not _arguments(node):
            edits += _extreme(node, depth, next(counter))
        elif node.data == "member_dot_arg" and str(node.children[1]) == "sum" and not _arguments(node):
            edits += _sum(node, depth, next(counter))
        elif node.data == "member_dot_arg" and str(node.children[1]) in ("validate", "named"):
            edits += _format_call(node, depth, next(counter))
    return _apply(source, edits) if edits else source


def presence_of_names(tree: lark.Tree[Any]) -> Iterator[tuple[lark.Tree[Any], lark.Token, bool]]:
    """Every `has(<bare name>)` of `tree`: the call, the name, and whether the name is a context name
    (always defined, so the test is `true`) rather than a local variable (of a comprehension or
    `cel.bind`, which may shadow a context name) or an unknown name, whose test CEL refuses."""
    pending: list[tuple[lark.Tree[Any], frozenset[str]]] = [(tree, frozenset())]
    while pending:
        node, local = pending.pop()
        if node.data == "ident_arg" and str(node.children[0]) == "has" and len(args := _arguments(node)) == 1:
            name = _bare_ident(args[0])
            if name is not None:
                token = _name_token(args[0])
                yield node, token, name in CONTEXT_NAMES and name not in local
                continue
        inner = local | _bound(node)
        for index, child in enumerate(node.children):
            if isinstance(child, lark.Tree):
                pending.append((child, local if index == 0 else inner))  # a call's receiver is outside its scope


def _bound(node: lark.Tree[Any]) -> frozenset[str]:
    """The local variables a macro call names for its arguments (not for its receiver, child 0)."""
    if node.data != "member_dot_arg":
        return frozenset()
    method, args = str(node.children[1]), _arguments(node)
    if method in _ONE_VARIABLE or (method == "bind" and _bare_ident(node.children[0]) == "cel"):
        count = 1
    elif method in _TWO_VARIABLE:
        count = 2 if method.startswith("transform") or len(args) == 3 else 1
    else:
        return frozenset()
    return frozenset(name for name in map(_bare_ident, args[:count]) if name is not None)


def _name_token(node: Any) -> lark.Token:
    while isinstance(node, lark.Tree) and node.data != "ident":
        node = node.children[0]
    return cast(lark.Token, node.children[0])


def _format_call(call: lark.Tree[Any], depth: int, number: int) -> list[_Edit]:
    """Kubernetes' format library, whose results are optionals that only CEL can build (libs/formats.py):
    `f.validate(s)` and `format.named(n)`."""
    receiver, args, name = call.children[0], _arguments(call), f"__rulesched_f{number}"
    if len(args) != 1:
        return []
    (argument,) = args
    if str(call.children[1]) == "named":
        if _bare_ident(receiver) != "format":
            return []
        return [
            _Edit(call.meta.start_pos, argument.meta.start_pos, depth, f"cel.bind({name}, "),
            _Edit(
                argument.meta.end_pos,
                call.meta.end_pos,
                depth,
                f", {IS_FORMAT}({name}) ? optional.of({name}) : optional.none())",
            ),
        ]
    return [
        _Edit(receiver.meta.start_pos, receiver.meta.start_pos, depth, f"cel.bind({name}, {ERRORS}("),
        _Edit(receiver.meta.end_pos, argument.meta.start_pos, depth, ", "),
        _Edit(
            argument.meta.end_pos,
            call.meta.end_pos,
            depth,
            f"), {name}.size() == 0 ? optional.none() : optional.of({name}))",
        ),
    ]


def _extreme(call: lark.Tree[Any], depth: int, number: int) -> list[_Edit]:
    """`l.min()` → `cel.bind(l0, l, l0[rulesched_argmin(l0)])`: the element itself, of any type."""
    receiver, name = call.children[0], f"__rulesched_l{number}"
    function = ARGMIN if str(call.children[1]) == "min" else ARGMAX
    return [
        _Edit(receiver.meta.start_pos, receiver.meta.start_pos, depth, f"cel.bind({name}, "),
        _Edit(receiver.meta.end_pos, call.meta.end_pos, depth, f", {name}[{function}({name})])"),
    ]


def _sum(call: lark.Tree[Any], depth: int, number: int) -> list[_Edit]:
    """`l.sum()`: a number, or for durations one made from their nanoseconds."""
    receiver, name = call.children[0], f"__rulesched_s{number}"
    durations = f"dyn(duration(string({SUM_NANOS}({name})) + 'ns'))"
    return [
        _Edit(receiver.meta.start_pos, receiver.meta.start_pos, depth, f"cel.bind({name}, "),
        _Edit(
            receiver.meta.end_pos,
            call.meta.end_pos,
            depth,
            f", {SUM_IS_DURATION}({name}) ? {durations} : dyn({SUM}({name})))",
        ),
    ]


def _two_variable(call: lark.Tree[Any], depth: int, number: int) -> list[_Edit]:
    method, args = str(call.children[1]), _arguments(call)
    names = [_bare_ident(a) for a in args[:2]]
    size = 4 if method.startswith("transform") else 3
    if len(args) not in (3, size) or None in names:
        return []
    k, v = names
    c, ks = f"__rulesched_c{number}", f"__rulesched_k{number}"
    value = f"cel.bind({v}, {c}[{k}], "
    receiver, first, last = call.children[0], args[2], args[-1]
    filtered = len(args) == 4
    if method in ("all", "exists", "existsOne", "exists_one"):
        macro = "exists_one" if method == "existsOne" else method
        middle, between, closing = f", {KEYS}({c}).{macro}({k}, {value}", "", ")))"
    elif method == "transformList" and filtered:
        middle, between = f", {KEYS}({c}).filter({k}, {value}", f")).map({k}, {value}"
        closing = ")))"
    elif method == "transformList":
        middle, between, closing = f", {KEYS}({c}).map({k}, {value}", "", ")))"
    elif method == "transformMap" and filtered:
        middle = f", cel.bind({ks}, {KEYS}({c}).filter({k}, {value}"
        between, closing = f")), {ZIP}({ks}, {ks}.map({k}, {value}", ")))))"
    elif method == "transformMap":
        middle, between, closing = f", {ZIP}({KEYS}({c}), {KEYS}({c}).map({k}, {value}", "", "))))"
    elif filtered:  # transformMapEntry
        middle, between = f", {ENTRIES}({KEYS}({c}).filter({k}, {value}", f")).map({k}, {value}"
        closing = "))))"
    else:
        middle, between, closing = f", {ENTRIES}({KEYS}({c}).map({k}, {value}", "", "))))"
    edits = [
        _Edit(receiver.meta.start_pos, receiver.meta.start_pos, depth, f"cel.bind({c}, "),
        _Edit(receiver.meta.end_pos, first.meta.start_pos, depth, middle),
        _Edit(last.meta.end_pos, call.meta.end_pos, depth, closing),
    ]
    if filtered:
        edits.append(_Edit(first.meta.end_pos, last.meta.start_pos, depth, between))
    return edits


def for_celpy(source: str) -> str:
    """`source` (already `rewritten`) as celpy can run it."""
    tree = syntax_tree(source)
    if tree is None:
        return source
    edits: list[_Edit] = []
    for node, depth in _walk(tree):
        if node.data == "member_dot_arg":
            edits += _celpy_call(source, node, depth)
        elif node.data in ("member_dot", "member_index"):
            edits += _optional_selection(source, node, depth)
        elif node.data in ("list_lit", "map_lit"):
            edits += _optional_entries(source, node, depth)
        elif node.data == "ident_arg" and str(node.children[0]) == "has":
            edits += _has(source, node, depth)
    return _apply(source, edits) if edits else source


def _has(source: str, call: lark.Tree[Any], depth: int) -> list[_Edit]:
    """`has(e.f)` → `has__field(e, 'f')`: whether the map `e` has the key `f`, an error when `e` is one."""
    args = _arguments(call)
    selection = args[0] if len(args) == 1 else None
    while isinstance(selection, lark.Tree) and selection.data in _WRAPPERS and len(selection.children) == 1:
        selection = selection.children[0]
    if not (isinstance(selection, lark.Tree) and selection.data == "member_dot"):
        return []
    receiver, token = selection.children[0], cast(lark.Token, selection.children[1])
    if "?" in source[receiver.meta.end_pos : _start(token)]:
        return []  # `has(x.?f)`: left to the engine
    return [
        _Edit(call.meta.start_pos, receiver.meta.start_pos, depth, "has__field("),
        _Edit(receiver.meta.end_pos, call.meta.end_pos, depth, f", '{token}')"),
    ]


def _optional_entries(source: str, literal: lark.Tree[Any], depth: int) -> list[_Edit]:
    """`[a, ?b]` → `optional__list([optional__of(a), b])`, `{k: v, ?k2: o}` →
    `optional__map([k, optional__of(v), k2, o])`: the entries marked `?` are kept when they hold a value."""
    parts = [c for c in literal.children if isinstance(c, lark.Tree)]
    items = [c for c in parts[0].children if isinstance(c, lark.Tree)] if parts else []
    values = items if literal.data == "list_lit" else items[1::2]
    marks = [_marked(source, literal, items, items.index(v) - (0 if literal.data == "list_lit" else 1)) for v in values]
    if not any(mark is not None for mark in marks):
        return []
    start, end = literal.meta.start_pos, literal.meta.end_pos
    function = "optional__list" if literal.data == "list_lit" else "optional__map"
    edits = [_Edit(start, start + 1, depth, f"{function}(["), _Edit(end - 1, end, depth, "])")]
    if literal.data == "map_lit":
        for key, value in zip(items[0::2], items[1::2], strict=True):
            edits.append(_Edit(key.meta.end_pos, value.meta.start_pos, depth, ", "))
    for value, mark in zip(values, marks, strict=True):
        if mark is not None:
            edits.append(_Edit(mark, mark + 1, depth, ""))
        else:
            edits.append(_Edit(value.meta.start_pos, value.meta.start_pos, depth, "optional__of("))
            edits.append(_Edit(value.meta.end_pos, value.meta.end_pos, depth + 1000, ")"))
    return edits


def _marked(source: str, literal: lark.Tree[Any], items: list[lark.Tree[Any]], index: int) -> int | None:
    """The position of the `?` before entry `index` (its element, or its key in a map), if it has one:
    the grammar drops the `?` from the tree, so it is looked for between the entry and what precedes it."""
    before = literal.meta.start_pos + 1 if index == 0 else items[index - 1].meta.end_pos
    gap = source[before : items[index].meta.start_pos]
    return before + gap.index("?") if "?" in gap else None


def _celpy_call(source: str, call: lark.Tree[Any], depth: int) -> list[_Edit]:
    receiver, token = call.children[0], cast(lark.Token, call.children[1])
    name, namespace = str(token), _bare_ident(receiver)
    args = _arguments(call)
    if namespace == "cel" and name == "bind" and len(args) == 3 and _bare_ident(args[0]) is not None:
        variable, init, body = args
        return [
            _Edit(call.meta.start_pos, init.meta.start_pos, depth, "["),
            _Edit(init.meta.end_pos, body.meta.start_pos, depth, f"].map({_bare_ident(variable)}, "),
            _Edit(body.meta.end_pos, call.meta.end_pos, depth, ")[0]"),
        ]
    if namespace is not None and f"{namespace}.{name}" in NAMESPACED:
        return [_Edit(call.meta.start_pos, _end(token), depth, celpy_name(f"{namespace}.{name}"))]
    if name in TWINS:
        return [_Edit(_start(token), _end(token), depth, celpy_name(name, member=True))]
    return []


def _start(token: lark.Token) -> int:
    return token.start_pos or 0  # the parser gives every token its position


def _end(token: lark.Token) -> int:
    return token.end_pos or 0


def _optional_selection(source: str, node: lark.Tree[Any], depth: int) -> list[_Edit]:
    """`x.?f` → `optional__field(x, 'f')`, `m[?k]` → `optional__index(m, k)` (the `?` is not in the tree)."""
    receiver = node.children[0]
    if node.data == "member_dot":
        token = cast(lark.Token, node.children[1])
        if "?" not in source[receiver.meta.end_pos : _start(token)]:
            return []
        return [
            _Edit(node.meta.start_pos, node.meta.start_pos, depth, "optional__field("),
            _Edit(receiver.meta.end_pos, node.meta.end_pos, depth, f", '{token}')"),
        ]
    key = node.children[1]
    if "?" not in source[receiver.meta.end_pos : key.meta.start_pos]:
        return []
    return [
        _Edit(node.meta.start_pos, node.meta.start_pos, depth, "optional__index("),
        _Edit(receiver.meta.end_pos, key.meta.start_pos, depth, ", "),
        _Edit(key.meta.end_pos, node.meta.end_pos, depth, ")"),
    ]
