"""`rulesched check`: load and compile rule files the way the server does, and report every error.

Rules that load but can never matter (see `rulesched.tools.lint`), and with `--unknown-fields warn` the
fields the Kubernetes schema lacks, are reported as warnings on stderr, prefixed `warning:`; they do not
change the exit status.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rulesched.rules.cel import Engine, EngineName, make_engine
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.tools.lint import lint


def check(paths: Sequence[Path], engine: EngineName | Engine, out: TextIO, err: TextIO) -> int:
    """0 when every file loads; otherwise every error, one per line, and 1."""
    try:
        book = load_rule_book(list(paths), make_engine(engine) if isinstance(engine, str) else engine)
    except RulesLoadFailed as failure:
        for error in failure.errors:
            print(error, file=err)
        print(f"{len(failure.errors)} error(s); nothing would be loaded", file=err)
        return 1
    warnings: list[object] = [*book.warnings, *lint(book, list(paths))]
    for warning in warnings:
        print(f"warning: {warning}", file=err)
    names = ", ".join(rs.name for rs in book.rule_sets) or "none"
    summary = f"ok: {len(book.rule_sets)} rule set(s) in {len(book.files)} file(s): {names}"
    print(summary + (f"; {len(warnings)} warning(s)" if warnings else ""), file=out)
    return 0
