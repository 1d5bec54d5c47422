"""`rulesched check`: load and compile rule files, print every error."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rulesched.rules.cel import ENGINE_NAMES


def add(commands: Any) -> None:
    check = commands.add_parser("check", help="load and compile rule files; print every error")
    check.add_argument("paths", nargs="*", type=Path, default=[Path("rules")], help="rule directories or files")
    check.add_argument("--cel-engine", choices=ENGINE_NAMES, default="cpp")
    check.add_argument(
        "--cel-cost-limit",
        type=int,
        default=1_000_000,
        metavar="N",
        help="the server's --cel-cost-limit (default 1000000)",
    )
    check.add_argument(
        "--unknown-fields",
        choices=("error", "warn"),
        default="error",
        help="a field the shipped Kubernetes schema lacks: an error, or a warning (the server's --unknown-fields)",
    )
    check.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.rules.cel import Limits, make_engine
    from rulesched.tools.check import check

    engine = make_engine(args.cel_engine, Limits(cost=args.cel_cost_limit, unknown_fields=args.unknown_fields))
    return check(args.paths, engine, sys.stdout, sys.stderr)
