"""The load-time type check: an expression's type from the types of the names it reads, or the first place
where it cannot work, with its position.

It walks the syntax tree both engines' expressions are parsed into (`analysis.syntax_tree`), so both engines
get one verdict. Context names are typed by the vocabulary (`vocabulary.context_types`): the Kubernetes
kinds from their schema (`kubernetes_types.json`), the others from the vocabulary's records. It refuses, as
Kubernetes' CEL type checker does: a field an object does not have (in `.f`, `.?f`, `['f']`, `has(x.f)`,
inside comprehensions and `cel.bind`), with the closest names; an operator its operands' types do not take
(`string > int`, `int * double`); a field of a scalar or a list; a result of the wrong type (`book.py`).
Whatever it cannot know is `dyn`, which is never refused: a field the schema leaves open, a function whose
result type it does not know, anything under `dyn(…)`. The operators' and functions' types are in
`typecheck_ops.py`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import lark

from rulesched.rules.cel import typecheck_ops as ops
from rulesched.rules.cel.analysis import arguments, bare_ident, string_literal, syntax_tree
from rulesched.rules.cel.base import UnknownFields
from rulesched.rules.cel.types import (
    BOOL,
    DYN,
    NULL,
    CelType,
    field_type,
    kubernetes_version,
    list_of,
    optional_of,
)
from rulesched.rules.vocabulary import context_types

_WRAPPERS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member", "primary"}
)
"""Grammar levels that, with a single child, only wrap it."""
_VARIABLES = "variables"


class TypeCheckError(Exception):
    """An expression whose types cannot work; `position` is the offset of the part at fault."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass(frozen=True, slots=True)
class Finding:
    """A warning: an unknown field of a Kubernetes kind, accepted as `dyn` (`--unknown-fields warn`)."""

    message: str
    position: int


@dataclass(slots=True)
class Checked:
    """An expression's type and the warnings met on the way."""

    type: CelType
    warnings: list[Finding] = field(default_factory=list)


def check(
    source: str,
    names: Mapping[str, CelType],
    variables: Mapping[str, CelType] | None = None,
    unknown_fields: UnknownFields = "error",
) -> Checked:
    """The type of `source` with the context `names` and the rule set's `variables`; raises `TypeCheckError`.
    An expression the grammar cannot parse is `dyn` (the engine reports its syntax)."""
    tree = syntax_tree(source)
    if tree is None:
        return Checked(DYN)
    walker = _Walker(source, names, variables or {}, unknown_fields)
    try:
        return Checked(walker.type_of(tree, {}), walker.warnings)
    except RecursionError:  # nested past what CEL allows: the engine refuses it, naming its limit
        return Checked(DYN)


def typed(source: str, variables: Mapping[str, CelType], unknown_fields: UnknownFields = "error") -> Checked:
    """`check` of a rule's expression against every context name's type (the vocabulary's)."""
    return check(source, context_types(), variables, unknown_fields)


def line_column(source: str, position: int) -> tuple[int, int]:
    """The 1-based line and column of an offset into `source`."""
    before = source[:position]
    return before.count("\n") + 1, position - (before.rfind("\n") + 1) + 1


def suggestion(name: str, candidates: list[str]) -> str:
    """`: did you mean 'x'?` for the closest of `candidates` (a different case first), or nothing when none is
    close."""
    lowered = {c.lower(): c for c in candidates}
    close = [lowered[name.lower()]] if name.lower() in lowered else difflib.get_close_matches(name, candidates, 3, 0.6)
    return f": did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


Scope = Mapping[str, CelType]


class _Walker:
    """One expression's check: the types of its nodes, bottom up, with the names in scope."""

    def __init__(
        self, source: str, names: Mapping[str, CelType], variables: Mapping[str, CelType], unknown: UnknownFields
    ) -> None:
        self.source = source
        self.names = names
        self.variables = variables
        self.unknown = unknown
        self.warnings: list[Finding] = []

    def type_of(self, node: Any, scope: Scope) -> CelType:
        if isinstance(node, lark.Token):
            return DYN
        children = node.children
        if node.data in _WRAPPERS and len(children) == 1:
            return self.type_of(children[0], scope)
        rule = _RULES.get(node.data)
        return rule(self, node, scope) if rule is not None else DYN

    # Operators

    def _expr(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        condition, yes, no = (self.type_of(child, scope) for child in node.children)
        if condition.known and condition != BOOL:
            raise TypeCheckError(f"the condition of '_?_:_' must be a bool, not {condition}", node.meta.start_pos)
        return yes if yes == no or no == NULL else no if yes == NULL else DYN

    def _conditionalor(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        return self._logical(node, scope, "||")

    def _conditionaland(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        return self._logical(node, scope, "&&")

    def _logical(self, node: lark.Tree[Any], scope: Scope, operator: str) -> CelType:
        left, right = node.children
        types = self.type_of(left, scope), self.type_of(right, scope)
        if any(t.known and t != BOOL for t in types):
            raise self._no_overload(f"_{operator}_", types, self._operator_at(left, right, operator))
        return BOOL

    def _relation(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        return self._binary(node, scope)

    def _addition(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        return self._binary(node, scope)

    def _multiplication(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        return self._binary(node, scope)

    def _binary(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        operation, right = node.children
        left = operation.children[0]
        operator = ops.OPERATORS[operation.data]
        types = self.type_of(left, scope), self.type_of(right, scope)
        result = ops.binary(operator, *types)
        if result is None:
            raise self._no_overload(ops.cel_name(operator), types, self._operator_at(left, right, operator))
        return result

    def _unary(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        operation, operand = node.children
        found = self.type_of(operand, scope)
        negate = operation.data == "unary_neg"
        allowed = ops.NEGATABLE if negate else {"bool"}
        if found.known and found.kind not in allowed:
            raise self._no_overload("-_" if negate else "!_", (found,), node.meta.start_pos)
        return found if negate else BOOL

    # Selections

    def _member_dot(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        receiver, name = node.children
        at = _offset(name)
        optional = "?" in self.source[receiver.meta.end_pos : at]
        return self._select(receiver, str(name), at, scope, optional)

    def _member_index(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        receiver, index = node.children
        optional = "?" in self.source[receiver.meta.end_pos : index.meta.start_pos]
        key = string_literal(index)
        owner = self.type_of(receiver, scope)
        index_type = self.type_of(index, scope)
        base = owner.item if owner.kind == "optional" and owner.item else owner
        if base.kind == "object" and key is not None:
            return self._select(receiver, key, index.meta.start_pos, scope, optional)
        found = ops.indexed(base, index_type)
        if found is None:
            raise self._no_overload("_[_]", (base, index_type), index.meta.start_pos)
        return optional_of(found) if optional or owner.kind == "optional" else found

    def _select(self, receiver: Any, name: str, position: int, scope: Scope, optional: bool) -> CelType:
        owner = self.type_of(receiver, scope)
        wrapped = owner.kind == "optional"
        base = owner.item if wrapped and owner.item else owner
        if base.kind == "object" and base.name == _VARIABLES:
            found: CelType | None = self.variables.get(name, DYN)
        else:
            found = field_type(base, name)
        if found is None:
            found = self._unknown_field(receiver, base, name, position)
        return optional_of(found) if optional or wrapped else found

    def _unknown_field(self, receiver: Any, owner: CelType, name: str, position: int) -> CelType:
        what = self.source[receiver.meta.start_pos : receiver.meta.end_pos]
        if owner.kind == "list":
            message = f"{what} is a {owner}, which has no field '{name}': select an element or use a macro"
            raise TypeCheckError(message + " (all, exists, map, filter)", position)
        if owner.kind != "object":
            raise TypeCheckError(f"{what} is a {owner}, which has no field '{name}'", position)
        fields = sorted(owner.fields())
        schema = f", Kubernetes {kubernetes_version()}" if owner.kubernetes else ""
        message = f"undefined field '{name}' of {owner} ({what}{schema}){suggestion(name, fields)}"
        if owner.kubernetes and self.unknown == "warn":
            self.warnings.append(Finding(f"{message}; read as dyn (--unknown-fields warn)", position))
            return DYN
        raise TypeCheckError(message, position)

    # Calls

    def _ident_arg(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        name, args = str(node.children[0]), arguments(node)
        types = [self.type_of(arg, scope) for arg in args]
        if name == "has":
            return BOOL
        return ops.global_result(name, types)

    def _member_dot_arg(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        receiver, method, args = node.children[0], str(node.children[1]), arguments(node)
        namespace = bare_ident(receiver)
        if namespace not in (None, _VARIABLES) and namespace not in scope and namespace not in self.names:
            if f"{namespace}.{method}" == "cel.bind" and len(args) == 3:
                return self._bind(args, scope)
            return ops.global_result(f"{namespace}.{method}", [self.type_of(arg, scope) for arg in args])
        owner = self.type_of(receiver, scope)
        variables = ops.comprehension_variables(method, args)
        if variables:
            return self._comprehension(node, owner, method, args, scope)
        return ops.member_result(method, owner, [self.type_of(arg, scope) for arg in args])

    def _bind(self, args: list[lark.Tree[Any]], scope: Scope) -> CelType:
        name = bare_ident(args[0])
        value = self.type_of(args[1], scope)
        return self.type_of(args[2], {**scope, name: value} if name else scope)

    def _comprehension(
        self, node: lark.Tree[Any], owner: CelType, method: str, args: list[lark.Tree[Any]], scope: Scope
    ) -> CelType:
        names = ops.comprehension_variables(method, args)
        bound = ops.iteration_types(owner, len(names))
        if bound is None:
            message = f"{method}() ranges over a list or a map, not a {owner}"
            raise TypeCheckError(message, _offset(node.children[1]))
        inner = {**scope, **dict(zip(names, bound, strict=True))}
        body = [self.type_of(arg, inner) for arg in args[len(names) :]]
        return ops.comprehension_result(method, owner, bound, body)

    # Names and literals

    def _ident(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        name = str(node.children[0])
        if name in scope:
            return scope[name]
        if name == _VARIABLES:
            return CelType("object", name=_VARIABLES)
        return self.names.get(name) or ops.CONSTANTS.get(name, DYN)

    def _literal(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        return ops.literal_type(node.children[0])

    def _paren_expr(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        return self.type_of(node.children[0], scope)

    def _list_lit(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        items = [self.type_of(item, scope) for part in node.children for item in getattr(part, "children", ())]
        return list_of(ops.common(items))

    def _map_lit(self, node: lark.Tree[Any], scope: Scope) -> CelType:
        items = [self.type_of(item, scope) for part in node.children for item in getattr(part, "children", ())]
        return ops.map_literal(items)

    # Messages

    def _no_overload(self, function: str, types: tuple[CelType, ...], position: int) -> TypeCheckError:
        shown = ", ".join(str(t) for t in types)
        return TypeCheckError(f"found no matching overload for '{function}' applied to '({shown})'", position)

    def _operator_at(self, left: Any, right: Any, operator: str) -> int:
        """Where the operator between `left` and `right` is in the source."""
        start = left.meta.end_pos if isinstance(left, lark.Tree) else left.end_pos
        end = _offset(right)
        found = self.source.find(operator, start, end)
        return found if found >= 0 else start


_RULES: Mapping[str, Callable[[_Walker, lark.Tree[Any], Scope], CelType]] = {
    "expr": _Walker._expr,
    "conditionalor": _Walker._conditionalor,
    "conditionaland": _Walker._conditionaland,
    "relation": _Walker._relation,
    "addition": _Walker._addition,
    "multiplication": _Walker._multiplication,
    "unary": _Walker._unary,
    "member_dot": _Walker._member_dot,
    "member_index": _Walker._member_index,
    "ident_arg": _Walker._ident_arg,
    "member_dot_arg": _Walker._member_dot_arg,
    "ident": _Walker._ident,
    "literal": _Walker._literal,
    "paren_expr": _Walker._paren_expr,
    "list_lit": _Walker._list_lit,
    "map_lit": _Walker._map_lit,
}
"""How each grammar rule is typed; any other (a message literal, a leading-dot name) is `dyn`."""


def _offset(node: Any) -> int:
    """Where a token or a subtree starts in the source."""
    return int(node.meta.start_pos if isinstance(node, lark.Tree) else node.start_pos)
