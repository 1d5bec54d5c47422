"""The `rulesched` command: one module per subcommand, each with `add(commands)` and `run(args) -> int`.

`main(argv) -> int` is a plain function, called directly by the tests; `entrypoint()` is the console
script. A subcommand module imports its heavy dependencies inside `run`, so `rulesched --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rulesched.cli import audit, check, config, explain, replay, schema, serve, test, tune
from rulesched.cli import evaluate as eval_command

SUBCOMMANDS = (serve, check, explain, test, replay, tune, eval_command, config, audit, schema)
"""In the order `rulesched --help` lists them; each `add`s its parser, which sets `run`."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rulesched", description="A rule-driven Kubernetes scheduler extender.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status is the return value."""
    args = build_parser().parse_args(argv)
    status: int = args.run(args)
    return status


def entrypoint() -> None:
    sys.exit(main())
