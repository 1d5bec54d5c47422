"""What an expression reads, found from its tokens so that it works for every engine's syntax.

The answer is conservative: a comprehension variable that shadows a context name (`exists(node, …)`)
counts as a read. Over-reporting only costs caching opportunities; under-reporting would be a bug.
`paths` goes one step further and finds the field paths read under each name (`pod.metadata.labels`),
so that the evaluation engine can key its caches on those fields only and convert less.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rulesched.rules.cel import CONTEXT_NAMES

_STRINGS = re.compile(
    r"""[rRbB]{0,2}(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")""",
    re.DOTALL,
)
_NAME = re.compile(r"(?<![\w.])(" + "|".join(CONTEXT_NAMES) + r")\b")
_PATH = re.compile(r"(?<![\w.])(" + "|".join(CONTEXT_NAMES) + r")\b((?:\s*\.\s*[A-Za-z_]\w*)*)(\s*\()?")
_VARIABLE = re.compile(r"(?<![\w.])variables\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(['\"])([^'\"]*)\2\s*\])")


@dataclass(frozen=True, slots=True)
class Reads:
    """The context names an expression reads, and the rule set variables it names."""

    names: frozenset[str]
    variables: tuple[str, ...]


def reads(source: str) -> Reads:
    """What `source` reads; variable names are in order of first appearance."""
    variables = [m[1] or m[3] for m in _VARIABLE.finditer(_blank_strings(source, keep_quotes=True))]
    names = frozenset(_NAME.findall(_blank_strings(source, keep_quotes=False)))
    return Reads(names=names, variables=tuple(dict.fromkeys(variables)))


def _blank_strings(source: str, *, keep_quotes: bool) -> str:
    """`source` with string literals emptied, except `variables['x']` keys when `keep_quotes`."""
    if keep_quotes:
        return _STRINGS.sub(lambda m: m[0] if _is_variable_key(source, m.start()) else "''", source)
    return _STRINGS.sub("''", source)


def _is_variable_key(source: str, start: int) -> bool:
    return re.search(r"variables\s*\[\s*$", source[:start]) is not None


Path = tuple[str, ...]
"""Field names from a context value down; the empty path is the whole value."""

PRESENT = "\x00"
"""A field name no object has: a path ending with it reads only whether its parent field is present
(`has(node.metadata.labels)`), so trimming keeps the parent (a map) but none of its entries."""

_SIMPLE_STRING = re.compile(r"'([^'\\\n]*)'|\"([^\"\\\n]*)\"")
_INDEX = re.compile(r"\s*\[\s*'(_*)'\s*\]")
_MEMBER_OF = re.compile(r"(?:^|[(,&|?:\[{])\s*'(_*)'\s+in\s+$")
_HAS = re.compile(r"(?<![\w.])has\s*\(\s*$")
_TIGHTER = re.compile(r"\s*[-+*/%\[.(]")
"""What may follow `'k' in X` and bind tighter than `in`, so that `X` is not what `in` tests."""


def paths(source: str) -> dict[str, frozenset[Path]]:
    """For each context name `source` reads, the field paths it selects (`pod.metadata.labels` →
    ("metadata", "labels")). A string-literal index (`labels['zone']`) or membership test
    (`'zone' in labels`) selects that key, `has(x.y)` only the presence of `y`; anything else (another
    index, a method call, the bare name) ends the path there, so the value at a path is always enough to
    evaluate the expression."""
    masked, literals = _masked(source)
    found: dict[str, set[Path]] = {}
    for match in _PATH.finditer(masked):
        fields = tuple(f.strip() for f in match[2].split(".")[1:])
        if match[3] is not None:
            fields = fields[:-1]  # `node.metadata.size()`: a method of the value, not a field
        elif fields:
            fields += _narrowed(masked, literals, match.start(), match.end())
        found.setdefault(match[1], set()).add(fields)
    return {name: frozenset(selected) for name, selected in found.items()}


def _narrowed(masked: str, literals: dict[int, str], start: int, end: int) -> Path:
    """The key a field path is narrowed to by what surrounds it: an index, a membership test, `has()`."""
    before, after = masked[:start], masked[end:]
    index = _INDEX.match(after)
    member = _MEMBER_OF.search(before)
    if index and not member and (end + index.start(1) - 1) in literals:
        return (literals[end + index.start(1) - 1],)
    if member and not index and not _TIGHTER.match(after) and (member.start(1) - 1) in literals:
        return (literals[member.start(1) - 1],)
    if _HAS.search(before) and re.match(r"\s*\)", after):
        return (PRESENT,)
    return ()


def _masked(source: str) -> tuple[str, dict[int, str]]:
    """`source` with every string literal masked as `'___'` (same length, so positions hold), and the
    value of each simple literal (no prefix, no escape) by the position of its opening quote."""
    literals: dict[int, str] = {}

    def mask(match: re.Match[str]) -> str:
        simple = _SIMPLE_STRING.fullmatch(match[0])
        if simple:
            literals[match.start()] = simple[1] if simple[1] is not None else simple[2]
        return "'" + "_" * (len(match[0]) - 2) + "'"

    return _STRINGS.sub(mask, source), literals
