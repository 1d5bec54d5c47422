"""One bounded cache for the libraries' parsers: quantities, versions, URLs and regular expressions.

A library value often comes from a pod (a label, an annotation), so what a parser keeps must not grow
with what pods say: only short texts are kept, the last few thousand of them; a longer text is parsed
each time it is read (docs/operations/limits.md lists each bound).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")


def keep_short(kept: int, chars: int) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """A decorator: the parser, with its results for texts of at most `chars` characters kept (the last
    `kept`); a text that does not parse raises each time, as the parser does."""

    def decorate(parse: Callable[[str], T]) -> Callable[[str], T]:
        cached = lru_cache(maxsize=kept)(parse)

        def parsed(text: str) -> T:
            return cached(text) if len(text) <= chars else parse(text)

        parsed.__doc__ = parse.__doc__
        return parsed

    return decorate
