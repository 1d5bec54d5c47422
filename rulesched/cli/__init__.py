"""The `rulesched` command: one module per subcommand, each with `add(commands)` and `run(args) -> int`.

`main(argv) -> int` is a plain function, called directly by the tests; `entrypoint()` is the console
script. A subcommand module imports its heavy dependencies inside `run`, so `rulesched --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence

from rulesched.cli import audit, check, config, explain, replay, schema, serve, test, tune
from rulesched.cli import evaluate as eval_command

SUBCOMMANDS = (serve, check, explain, test, replay, tune, eval_command, config, audit, schema)
"""In the order `rulesched --help` lists them; each `add`s its parser, which sets `run`."""


def version() -> str:
    """The installed rulesched's version (`unknown` when run from sources that were never installed)."""
    try:
        return importlib.metadata.version("rulesched")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rulesched", description="A rule-driven Kubernetes scheduler extender.")
    parser.add_argument("--version", action="version", version=f"rulesched {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status is the return value. An argument the subcommand does not know is its
    usage error (argparse leaves those to the top parser, whose usage says nothing of the subcommand's flags)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        subcommand(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    status: int = args.run(args)
    return status


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of the subcommand `name`."""
    for action in parser._actions:  # argparse keeps its subparsers only there
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser


def entrypoint() -> None:
    sys.exit(main())
