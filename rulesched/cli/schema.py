"""`rulesched schema KIND`: print the JSON Schema of a document kind, for an editor or a CI check.

`rulesched schema` alone lists the kinds; `rulesched schema --write DIR` writes every kind's schema to DIR (how
`schemas/` is made).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rulesched.cli.common import fail


def add(commands: Any) -> None:
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of a document kind (editor completion and checks)",
        description="KIND: RuleFile (a RuleSet or a MetricSource), RuleSet, MetricSource, RuleTest, RecordingHeader.",
    )
    schema.add_argument(
        "kind", nargs="?", metavar="KIND", help="the document kind (case-insensitive); none: list the kinds"
    )
    schema.add_argument("--write", type=Path, metavar="DIR", help="write every kind's schema into DIR instead")
    schema.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rulesched.tools.schemas import FILES, KINDS, render

    if args.write is not None:
        args.write.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            (args.write / FILES[kind]).write_text(render(kind))
        print(f"wrote {len(KINDS)} schemas to {args.write}")
        return 0
    if args.kind is None:
        print("\n".join(["kinds (rulesched schema KIND prints one's JSON Schema):", *KINDS]))
        return 0
    kinds = {kind.lower(): kind for kind in KINDS}
    found = kinds.get(args.kind.lower())
    if found is None:
        return fail(f"unknown kind {args.kind!r}: want one of {', '.join(KINDS)}", 2)
    sys.stdout.write(render(found))
    return 0
