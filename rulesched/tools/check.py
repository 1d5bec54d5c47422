"""`rulesched check`: load and compile rule files the way the server does, and report every error.

Rules that load but can never matter (see `rulesched.tools.lint`), and with `--unknown-fields warn` the
fields the Kubernetes schema lacks, are reported as warnings on stderr, prefixed `warning:`; they do not
change the exit status. Paths with nothing in them (no rule set, no MetricSource) fail the check unless
`allow_empty`: a server given them would let every node pass. Given nodes or a recording (`CanaryFiles`), the
rules are also tried on them as the server's reload canary tries them (`rulesched.tools.check_canary`), and a
rule it names fails the check.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, TextIO

from rulesched.rules.cel import Engine, EngineName, make_engine
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.tools.check_canary import CanaryFiles
from rulesched.tools.check_canary import run as run_canary
from rulesched.tools.lint import lint


class Options(NamedTuple):
    """What `check` does beyond loading the rules."""

    allow_empty: bool = False
    canary: CanaryFiles = CanaryFiles()


NO_OPTIONS = Options()


def check(
    paths: Sequence[Path], engine: EngineName | Engine, out: TextIO, err: TextIO, options: Options = NO_OPTIONS
) -> int:
    """0 when every file loads (and the canary, when given files, names no rule); otherwise every error, one per
    line, and 1."""
    try:
        book = load_rule_book(list(paths), make_engine(engine) if isinstance(engine, str) else engine)
    except RulesLoadFailed as failure:
        for error in failure.errors:
            print(error, file=err)
        print(f"{len(failure.errors)} error(s); nothing would be loaded", file=err)
        return 1
    if not book.rule_sets and not book.metric_sources and not options.allow_empty:
        where = ", ".join(map(str, paths))
        print(f"{where}: no rule sets; a server given these rules would let every node pass", file=err)
        print("1 error(s); give --allow-empty to accept no rules", file=err)
        return 1
    if options.canary.given():
        failed = run_canary(book, options.canary, err)
        if failed:
            return failed
    warnings: list[object] = [*book.warnings, *lint(book, list(paths))]
    for warning in warnings:
        print(f"warning: {warning}", file=err)
    names = ", ".join(rs.name for rs in book.rule_sets) or "none"
    summary = f"ok: {len(book.rule_sets)} rule set(s) in {len(book.files)} file(s): {names}"
    print(summary + (f"; {len(warnings)} warning(s)" if warnings else ""), file=out)
    return 0
