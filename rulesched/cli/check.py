"""`rulesched check`: load and compile rule files, print every error; with nodes or a recording, run the canary."""

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
    check.add_argument(
        "--allow-empty", action="store_true", help="accept paths with no rule set in them (else an error)"
    )
    canary = check.add_argument_group(
        "canary", "try the rules as the server's reload canary does: a rule that fails on every node fails the check"
    )
    canary.add_argument("--nodes", type=Path, metavar="FILE", help="a NodeList file, JSON or YAML")
    canary.add_argument(
        "--pods", type=Path, metavar="FILE", help="a PodList file: the pods tried (without it, a minimal pod)"
    )
    canary.add_argument("--metrics", type=Path, metavar="FILE", help="a NodeMetricsList file")
    canary.add_argument("--namespaces", type=Path, metavar="FILE", help="a NamespaceList file")
    canary.add_argument("--recording", type=Path, metavar="DIR", help="a recording (serve --record): its latest calls")
    canary.add_argument("--sample", type=int, default=64, metavar="N", help="most pods tried (default 64)")
    check.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.rules.cel import Limits, make_engine
    from rulesched.tools.check import Options, check
    from rulesched.tools.check_canary import CanaryFiles
    from rulesched.tools.inputs import SourceFiles

    limits = Limits(cost=args.cel_cost_limit, unknown_fields=args.unknown_fields)
    engine = make_engine(args.cel_engine, limits)
    sources = SourceFiles(args.metrics, args.pods, args.namespaces)
    canary = CanaryFiles(args.nodes, sources, args.recording, args.sample)
    if not canary.given() and (args.pods or args.metrics or args.namespaces):
        print("rulesched check: --pods, --metrics and --namespaces go with --nodes", file=sys.stderr)
        return 2
    return check(args.paths, engine, sys.stdout, sys.stderr, Options(args.allow_empty, canary))
