"""`rulesched test`: run RuleTest files, expected decisions for pods on a cluster snapshot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rulesched.rules.cel import ENGINE_NAMES
from rulesched.tools.ruletest.load import DEFAULT_PATH


def add(commands: Any) -> None:
    test = commands.add_parser(
        "test",
        help="run RuleTest files: expected decisions for pods on a cluster snapshot",
        description="Exit status: 0 every case passed, 1 some case failed, 2 some test could not run.",
    )
    test.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help=f"RuleTest files or directories (searched recursively); default {DEFAULT_PATH}",
    )
    test.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp", help="unless a file sets celEngine")
    test.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML to FILE")
    test.add_argument("--verbose", "-v", action="store_true", help="list passing cases too")
    test.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.tools.ruletest.load import load_tests
    from rulesched.tools.ruletest.report import print_results, write_junit
    from rulesched.tools.ruletest.run import Runner

    suites, problems = load_tests(args.paths)
    runner = Runner(args.cel_engine)
    results = [runner.run(suite) for suite in suites]
    status = print_results(results, problems, sys.stdout, sys.stderr, verbose=args.verbose)
    if args.junit:
        write_junit(args.junit, results, problems)
    return status
