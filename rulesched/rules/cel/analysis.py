"""What an expression reads, found from its tokens so that it works for every engine's syntax.

The answer is conservative: a comprehension variable that shadows a context name (`exists(node, …)`)
counts as a read. Over-reporting only costs caching opportunities; under-reporting would be a bug.
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
