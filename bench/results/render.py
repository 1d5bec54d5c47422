"""The benchmark figures as they were recorded, round by round, rendered as Markdown from `recorded.json`.

docs/performance.md gives the current figures; the measurements behind them, and those of earlier rounds,
are kept here as data: each with its date, commit, command and note, its table (columns and rows, the cells
as they were written down) and the lines that came after the table in the run's output.

Usage: `python bench/results/render.py [--name NAME ...] [--list]`
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent / "recorded.json"


def load(path: Path = RECORDED) -> list[dict[str, Any]]:
    measurements: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["measurements"]
    return measurements


def row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render(measurement: Mapping[str, Any]) -> str:
    """One measurement: its title, where and how it was taken, its table and what followed it."""
    columns: Sequence[str] = measurement["columns"]
    lines = [
        f"## {measurement['title']}",
        "",
        f"{measurement['date']}, commit `{measurement['commit']}`: `{measurement['command']}`",
        "",
        measurement["note"],
        "",
        row(columns),
        row("---" for _ in columns),
        *(row(cells) for cells in measurement["rows"]),
    ]
    after = measurement.get("after") or []
    return "\n".join([*lines, *([""] if after else []), *after])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the recorded benchmark figures as Markdown.")
    parser.add_argument("--name", action="append", default=[], help="only this measurement (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the measurements' names and titles")
    args = parser.parse_args(argv)
    measurements = load()
    if args.list:
        print("\n".join(f"{m['name']}: {m['title']} ({m['date']}, {m['commit']})" for m in measurements))
        return 0
    unknown = set(args.name) - {m["name"] for m in measurements}
    if unknown:
        print(f"no measurement named {', '.join(sorted(unknown))} (--list names them)", file=sys.stderr)
        return 2
    chosen = [m for m in measurements if not args.name or m["name"] in args.name]
    print("\n\n".join(render(m) for m in chosen))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
