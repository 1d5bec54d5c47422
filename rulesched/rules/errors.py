"""Load-time errors: what was wrong, where (file, line, rule set, rule, field) and in which expression.

They are kept apart from evaluation errors (a rule failing on one node), which are data in a Decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoadError:
    """One problem in the rule files, with everything a user needs to find and fix it."""

    file: str
    message: str
    line: int | None = None
    rule_set: str | None = None
    rule: str | None = None
    field: str | None = None
    expression: str | None = None
    position: tuple[int, int] | None = None
    """Line and column inside the expression, 1-based, for CEL errors."""
    warning: bool = False
    """Not an error: the rules load, and this is said (`--unknown-fields warn`)."""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        who = "/".join(part for part in (self.rule_set, self.rule) if part)
        text = f"{where}: " + (f"{who}: " if who else "") + (f"{self.field}: " if self.field else "")
        text += self.message
        if self.expression is not None:
            text += f" in {self.expression!r}"
            if self.position:
                text += f" at {self.position[0]}:{self.position[1]}"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "ruleSet": self.rule_set,
            "rule": self.rule,
            "field": self.field,
            "message": self.message,
            "expression": self.expression,
            "position": list(self.position) if self.position else None,
            "text": str(self),
        }


class RulesLoadFailed(Exception):  # noqa: N818 - a public name other packages catch
    """A set of rule files that cannot be used; every problem found is in `errors`."""

    def __init__(self, errors: Sequence[LoadError]) -> None:
        self.errors = tuple(errors)
        count = len(self.errors)
        super().__init__(f"{count} error{'s' if count != 1 else ''} in the rule files:\n" + "\n".join(map(str, errors)))
