"""Worst-case cost of an expression, estimated at load time the way the kube-apiserver does.

The model is cel-go's (checker/cost.go) with the Kubernetes library costs (k8s.io/apiserver/pkg/cel/
library/cost.go): reading a name or a field costs 1, creating a list 10 and a map 30, a function call 1
plus its arguments; traversing a string costs 0.1 per character, a regular expression 0.25 per
character of the pattern times 0.1 per character matched; a comprehension costs its range's size times
the cost of one iteration, so nested comprehensions multiply. Sizes of strings, lists and maps are
tracked through the expression: a literal has its own size, an input field the size assumed in
`INPUTS` (Kubernetes' own limits where it has them), a concatenation the sum of its parts, `map()` the
size of its range. docs/rules/cost.md explains the model, the assumed sizes and how to read an error.

The estimate walks the parse tree of `rulesched.rules.cel.analysis` (cel-python's lark grammar, with the
optional syntax), which every install has; it needs no type checker: where the type is unknown, a
value counts as a string or a list of the assumed sizes, as it is used. Each function call's own cost,
by the shapes of what it is given, is `call_cost.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import lark

from rulesched.rules.cel.analysis import syntax_tree
from rulesched.rules.cel.call_cost import FUNCTIONS, call_cost, traverse
from rulesched.rules.cel.shape import ANY, SCALAR, Shape
from rulesched.rules.vocabulary import NAMES

INPUTS: Mapping[str, Shape] = {entry.name: entry.shape for entry in NAMES}
"""The sizes assumed for the context names (docs/rules/cost.md): declared with each name (`rules/vocabulary.py`)."""

LIST_CREATE, MAP_CREATE, OBJECT_CREATE = 10, 30, 40


@dataclass(frozen=True, slots=True)
class Estimate:
    cost: int
    shape: Shape
    position: tuple[int, int] | None = None
    """Where the expression's cost goes over the limit it was estimated against (1-based), if it does."""


class CostEstimateError(Exception):
    """The expression cannot be estimated (celpy's parser does not read it)."""


class Estimator:
    """Estimates one expression; `variables` are the rule set variables' estimates by name."""

    def __init__(self, variables: Mapping[str, Estimate] | None = None, limit: int | None = None) -> None:
        self.variables = dict(variables or {})
        self.locals: list[dict[str, Shape]] = []
        self.read_variables: set[str] = set()
        self.limit = limit
        self.culprit: tuple[int, int] | None = None
        """Line and column of the smallest part of the expression that alone is over `limit`."""

    def estimate(self, source: str) -> Estimate:
        tree = syntax_tree(source)
        if tree is None:
            raise CostEstimateError("cannot estimate the cost: the CEL grammar cannot parse this expression")
        try:
            found = self.visit(tree)
        except RecursionError:
            raise CostEstimateError("cannot estimate the cost: the expression is nested too deeply") from None
        # A rule set variable is evaluated at most once per evaluation (lazily), however often it is read.
        extra = sum(self.variables[name].cost for name in self.read_variables)
        position = self.culprit or ((1, 1) if self.limit is not None and found.cost + extra > self.limit else None)
        return Estimate(found.cost + extra, found.shape, position)

    def visit(self, node: Any) -> Estimate:
        if not isinstance(node, lark.Tree):
            return Estimate(0, SCALAR)
        handler: Callable[[lark.Tree[Any]], Estimate] | None = getattr(self, f"_{node.data}", None)
        found = self._default(node) if handler is None else handler(node)
        if self.culprit is None and self.limit is not None and found.cost > self.limit and not node.meta.empty:
            self.culprit = (node.meta.line, node.meta.column)
        return found

    def _default(self, node: lark.Tree[Any]) -> Estimate:
        parts = [self.visit(c) for c in node.children if isinstance(c, lark.Tree)]
        if len(parts) == 1:
            return parts[0]
        return Estimate(sum(p.cost for p in parts) + (1 if parts else 0), SCALAR)

    # Structure

    def _expr(self, node: lark.Tree[Any]) -> Estimate:
        parts = [self.visit(c) for c in node.children]
        if len(parts) == 1:
            return parts[0]
        condition, yes, no = parts
        return Estimate(condition.cost + max(yes.cost, no.cost), _union(yes.shape, no.shape))

    def _conditionalor(self, node: lark.Tree[Any]) -> Estimate:
        parts = [self.visit(c) for c in node.children]
        if len(parts) == 1:
            return parts[0]
        return Estimate(sum(p.cost for p in parts), SCALAR)

    _conditionaland = _conditionalor

    def _paren_expr(self, node: lark.Tree[Any]) -> Estimate:
        return self.visit(node.children[0])

    def _unary(self, node: lark.Tree[Any]) -> Estimate:
        parts = [self.visit(c) for c in node.children if isinstance(c, lark.Tree) and c.children]
        if len(node.children) == 1:
            return parts[0]
        return Estimate(sum(p.cost for p in parts) + 1, SCALAR)

    def _binary(self, node: lark.Tree[Any]) -> tuple[str, Estimate, Estimate] | None:
        if len(node.children) == 1:
            return None
        operator, right = node.children
        return str(operator.data), self.visit(operator.children[0]), self.visit(right)

    def _relation(self, node: lark.Tree[Any]) -> Estimate:
        found = self._binary(node)
        if found is None:
            return self.visit(node.children[0])
        operator, left, right = found
        args = left.cost + right.cost
        if operator == "relation_in":
            # List membership is O(n) (cel-go's InList); in a map, a lookup.
            scan = 1 if right.shape.mapping else right.shape.length(as_list=True)
            return Estimate(args + scan, SCALAR)
        smallest = min(left.shape.length(), right.shape.length())
        return Estimate(args + max(1, traverse(smallest)), SCALAR)

    def _addition(self, node: lark.Tree[Any]) -> Estimate:
        found = self._binary(node)
        if found is None:
            return self.visit(node.children[0])
        operator, left, right = found
        args = left.cost + right.cost
        if operator == "addition_add" and _sized(left.shape, right.shape):
            size = left.shape.length() + right.shape.length()
            item = _union(left.shape.element(), right.shape.element())
            return Estimate(args + max(1, traverse(size)), Shape(size=size, item=item))
        return Estimate(args + 1, SCALAR)

    def _multiplication(self, node: lark.Tree[Any]) -> Estimate:
        found = self._binary(node)
        if found is None:
            return self.visit(node.children[0])
        _, left, right = found
        return Estimate(left.cost + right.cost + 1, SCALAR)

    # Values

    def _literal(self, node: lark.Tree[Any]) -> Estimate:
        token = cast(lark.Token, node.children[0])
        if token.type in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
            text = str(token).lstrip("bBrR")
            quotes = 6 if text[:3] in ('"""', "'''") else 2
            return Estimate(0, Shape(size=max(0, len(text) - quotes)))
        return Estimate(0, SCALAR)

    def _list_lit(self, node: lark.Tree[Any]) -> Estimate:
        items = [self.visit(c) for c in _arguments(node)]
        item = _union(*(i.shape for i in items)) if items else SCALAR
        return Estimate(LIST_CREATE + sum(i.cost for i in items), Shape(size=len(items), item=item))

    def _map_lit(self, node: lark.Tree[Any]) -> Estimate:
        parts = [self.visit(c) for c in _arguments(node)]
        values = parts[1::2]
        item = _union(*(v.shape for v in values)) if values else SCALAR
        return Estimate(MAP_CREATE + sum(p.cost for p in parts), Shape(size=len(values), item=item, mapping=True))

    def _member_object(self, node: lark.Tree[Any]) -> Estimate:
        parts = [self.visit(c) for c in node.find_data("expr")]
        return Estimate(OBJECT_CREATE + sum(p.cost for p in parts), ANY)

    def _ident(self, node: lark.Tree[Any]) -> Estimate:
        name = str(node.children[0])
        for scope in reversed(self.locals):
            if name in scope:
                return Estimate(1, scope[name])
        return Estimate(1, INPUTS.get(name, SCALAR))

    _dot_ident = _ident

    def _member_dot(self, node: lark.Tree[Any]) -> Estimate:
        operand, name = node.children
        if _is_ident(operand, "variables") and not self._is_local("variables"):
            return self._variable(str(name))
        found = self.visit(operand)
        return Estimate(found.cost + 1, found.shape.member(str(name)))

    def _variable(self, name: str) -> Estimate:
        known = self.variables.get(name)
        if known is None:
            return Estimate(2, ANY)
        self.read_variables.add(name)
        return Estimate(2, known.shape)

    def _member_index(self, node: lark.Tree[Any]) -> Estimate:
        key = _literal_text(node.children[1])
        if key is not None and _is_ident(node.children[0], "variables") and not self._is_local("variables"):
            return self._variable(key)
        container, index = (self.visit(c) for c in node.children)
        shape = container.shape.member(key) if key is not None else container.shape.element()
        return Estimate(container.cost + index.cost + 1, shape)

    # Calls

    def _ident_arg(self, node: lark.Tree[Any]) -> Estimate:
        name = str(node.children[0])
        arguments = _arguments(node)
        if name == "has":
            return Estimate(sum(self.visit(a).cost for a in arguments) + 1, SCALAR)
        args = [self.visit(a) for a in arguments]
        return _call(name, None, args)

    def _member_dot_arg(self, node: lark.Tree[Any]) -> Estimate:
        target_node, name_token = node.children[0], node.children[1]
        name = str(name_token)
        arguments = _arguments(node)
        if name in _MACROS and _comprehension_names(name, arguments):
            return self._comprehension(name, target_node, arguments)
        if name == "bind" and _is_ident(target_node, "cel") and len(arguments) == 3:
            return self._bind(arguments)
        namespace = _ident_name(target_node)
        args = [self.visit(a) for a in arguments]
        if namespace in _NAMESPACES and not self._is_local(namespace):
            return _call(f"{namespace}.{name}" if f"{namespace}.{name}" in FUNCTIONS else name, None, args)
        target = self.visit(target_node)
        found = _call(name, target, args)
        return Estimate(found.cost + target.cost, found.shape)

    def _bind(self, arguments: Sequence[lark.Tree[Any]]) -> Estimate:
        name = _ident_name(arguments[0]) or ""
        init = self.visit(arguments[1])
        self.locals.append({name: init.shape})
        try:
            body = self.visit(arguments[2])
        finally:
            self.locals.pop()
        return Estimate(init.cost + body.cost, body.shape)

    def _comprehension(self, macro: str, target_node: Any, arguments: Sequence[lark.Tree[Any]]) -> Estimate:
        target = self.visit(target_node)
        names = _comprehension_names(macro, arguments)
        count = target.shape.length(as_list=True)
        element = target.shape.element()
        key = ANY if target.shape.mapping or target.shape.unknown else SCALAR  # a map's keys, or a list's index
        if len(names) == 1:
            scope = {names[0]: key if target.shape.mapping else element}  # over a map: its keys
        else:
            scope = {names[0]: key, names[-1]: element}
        self.locals.append(scope)
        try:
            bodies = [self.visit(a) for a in arguments[len(names) :]]
        finally:
            self.locals.pop()
        body = sum(b.cost for b in bodies)
        # The loop condition and step around the body: cel-go's expansion of each macro.
        step = _MACROS[macro]
        shape = SCALAR
        if macro in ("map", "transformList", "transformMap", "filter"):
            item = bodies[-1].shape if macro != "filter" else element
            shape = Shape(size=count, item=item)
        return Estimate(target.cost + 1 + count * (body + step), shape)

    def _is_local(self, name: str) -> bool:
        return any(name in scope for scope in self.locals)


_NAMESPACES = frozenset({"sets", "math", "optional", "strings", "base64", "cel", "lists", "jsonpatch"})
"""Function name prefixes: `sets.contains(a, b)` is a global function, not a method of `sets`."""

_MACROS: Mapping[str, int] = {
    "all": 3,
    "exists": 3,
    "exists_one": 3,
    "existsOne": 3,
    "map": 13,
    "filter": 14,
    "transformList": 13,
    "transformMap": 33,
    "transformMapEntry": 33,
}
"""Comprehension macros, with the cost of one iteration beside the body's: cel-go's loop condition
(`@not_strictly_false(__result__)`) and step (`__result__ && body`, `__result__ + [body]`, ...)."""


def _comprehension_names(macro: str, arguments: Sequence[lark.Tree[Any]]) -> list[str]:
    """The variables a macro call names (empty: not a comprehension). Each has one body but the filtered
    forms, which have two: `l.map(x, p, f)`, `m.transformMap(k, v, p, f)` and the other `transform*`."""
    filtered = (macro == "map" and len(arguments) == 3) or (macro.startswith("transform") and len(arguments) == 4)
    names = [_ident_name(a) for a in arguments[: len(arguments) - (2 if filtered else 1)]]
    return [n for n in names if n] if names and len(names) <= 2 and all(names) else []


def _arguments(node: lark.Tree[Any]) -> list[lark.Tree[Any]]:
    for child in node.children:
        if isinstance(child, lark.Tree) and child.data in ("exprlist", "mapinits", "fieldinits"):
            return [c for c in child.children if isinstance(c, lark.Tree)]
    return []


def _ident_name(node: Any) -> str | None:
    """The name when `node` is a bare identifier (through the expression chain), else None."""
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    if isinstance(node, lark.Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def _is_ident(node: Any, name: str) -> bool:
    return _ident_name(node) == name


def _literal_text(node: Any) -> str | None:
    """The value of a string literal (through the expression chain), else None."""
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "literal":
        node = node.children[0]
    if isinstance(node, lark.Tree) and node.data == "literal":
        token = cast(lark.Token, node.children[0])
        if token.type == "STRING_LIT":
            return str(token)[1:-1]
    return None


def _sized(*shapes: Shape) -> bool:
    return any(s.size is not None or s.unknown for s in shapes)


def _union(*shapes: Shape) -> Shape:
    """The larger of every shape: what a value that may be any of them is bounded by."""
    if not shapes:
        return SCALAR
    if len(shapes) == 1:
        return shapes[0]
    if any(s.unknown for s in shapes):
        return ANY
    sizes = [s.size for s in shapes if s.size is not None]
    items = [s.item for s in shapes if s.item is not None]
    return Shape(size=max(sizes) if sizes else None, item=_union(*items) if items else None)


def _call(name: str, target: Estimate | None, args: Sequence[Estimate]) -> Estimate:
    cost, shape = call_cost(name, target.shape if target is not None else None, [a.shape for a in args])
    return Estimate(cost + sum(a.cost for a in args), shape)


def estimate(source: str, variables: Mapping[str, Estimate] | None = None, limit: int | None = None) -> Estimate:
    """The worst-case cost of `source`, reading rule set `variables` (already estimated) by name; when
    `limit` is given, the estimate's `position` tells where the cost first goes over it."""
    return Estimator(variables, limit).estimate(source)


def over_limit_message(found: Estimate, limit: int) -> str:
    """The load error of an expression estimated over `limit`."""
    return (
        f"estimated worst-case cost {found.cost:,} is over the limit of {limit:,}"
        " (setting cel_cost_limit; docs/rules/cost.md explains the estimate)"
    )
