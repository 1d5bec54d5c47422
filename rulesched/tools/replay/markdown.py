"""`rulesched replay --output markdown`: the impact report as a pull-request comment.

A headline that says at once whether the change matters (pods compared, feasible nodes changed,
unschedulable, schedulable again, top node changed, the `--fail-on` verdicts), the rules whose
rejections change (before and after), and the biggest changes in a collapsible `<details>` block. GitHub
refuses a comment over 65,536 characters: the comment is built within `LIMIT` whatever the recording's
size, every name cut to a readable length and the rows that do not fit counted in a note that points at
`--output json`, which has them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

GITHUB_LIMIT = 65_536
"""The most characters GitHub takes in an issue or pull-request comment."""
LIMIT = 60_000
"""What the comment may take: below GitHub's limit with room for a CI job to add a line of its own."""
NAME = 120
"""The longest name shown whole (pods, nodes, rules); longer ones are cut with an ellipsis."""


def code(text: object, width: int = NAME) -> str:
    """`text` as inline code in a table cell: one line, no backticks or pipes to break it, at most `width`."""
    flat = " ".join(str(text).split()).replace("`", "'").replace("|", "\\|")
    return f"`{flat if len(flat) <= width else flat[: width - 1] + '…'}`"


def render_markdown(found: Mapping[str, Any]) -> str:
    """The report as GitHub-flavoured Markdown, at most `LIMIT` characters."""
    head = _headline(found)
    budget = LIMIT - len(head) - 200  # the headings and the tags below take less
    # The examples first: a few, each bounded; the rules, one row each, take what is left.
    examples, budget = _fitting([f"- {_example(e)}" for e in found["examples"]], budget, "changes")
    rules, _ = _fitting(_rule_lines(found["rejections"]), budget, "rules")
    parts = [head]
    if rules:
        parts.append("\n".join(["**Rejections per rule** (nodes rejected over every filter call):", "", *rules]))
    if examples:
        summary = f"Biggest changes ({len(found['examples'])})"
        parts.append("\n".join([f"<details><summary>{summary}</summary>", "", *examples, "", "</details>"]))
    return "\n\n".join(parts) + "\n"


def _headline(found: Mapping[str, Any]) -> str:
    requests, recording, rules = found["requests"], found["recording"], found["rules"]
    changed = found["feasibleChanged"] + found["topNodeChanged"]
    verdict = "no pod's decision changes" if changed == 0 else "decisions change"
    failed = [t for t in found["thresholds"] if t["breached"]]
    mark = "❌" if failed else ("⚠️" if changed else "✅")
    lines = [
        f"### {mark} rulesched replay: {verdict}",
        "",
        f"Rules {code(rules['new'])} against {_plain(rules['baseline'])}; "
        f"{requests['filter'] + requests['prioritize']} calls ({requests['filter']} filter, "
        f"{requests['prioritize']} prioritize) from {code(recording['path'])} "
        f"({recording['segments']} segment{'' if recording['segments'] == 1 else 's'}).",
        "",
        "| pods | count |",
        "|---|---:|",
        f"| compared | {found['pods']} |",
        f"| feasible nodes change | {found['feasibleChanged']} |",
        f"| become unschedulable | {found['unschedulable']} |",
        f"| become schedulable again | {found['schedulableAgain']} |",
        f"| top node changes | {found['topNodeChanged']} |",
    ]
    for threshold in found["thresholds"]:
        state = "**breached**" if threshold["breached"] else "ok"
        lines.append(f"\n`--fail-on {threshold['threshold']}`: {threshold['actual']}, {state}")
    if requests["skipped"]:
        lines.append(f"\n{requests['skipped']} calls cut short by the request deadline when recorded were skipped.")
    if recording["truncatedSegments"]:
        lines.append(f"\n{len(recording['truncatedSegments'])} segments were cut short and read up to where they end.")
    return "\n".join(lines)


def _plain(text: object) -> str:
    """`text` as plain Markdown: one line, at most `NAME` characters, nothing that makes a link or a tag."""
    flat = " ".join(str(text).split())
    flat = flat if len(flat) <= NAME else flat[: NAME - 1] + "…"
    return "".join(f"\\{c}" if c in "\\`*_[]<>|#" else c for c in flat)


def _rule_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    changed = [r for r in rows if r["before"] != r["after"]]
    if not changed:
        return []
    lines = ["| rule | before | after | change |", "|---|---:|---:|---:|"]
    lines += [f"| {code(r['rule'])} | {r['before']} | {r['after']} | {r['after'] - r['before']:+d} |" for r in changed]
    return lines


_NOTE = "\n… {left} more {what} not shown: `rulesched replay --output json` has them all."


def _fitting(lines: list[str], budget: int, what: str) -> tuple[list[str], int]:
    """The first `lines` that fit in `budget` characters, a note counting the rest, and the budget left."""
    if sum(len(line) + 1 for line in lines) <= budget:
        return lines, budget - sum(len(line) + 1 for line in lines)
    budget -= len(_NOTE) + 20  # the note, with its numbers
    kept: list[str] = []
    for line in lines:
        if len(line) + 1 > budget:
            break
        kept.append(line)
        budget -= len(line) + 1
    kept.append(_NOTE.format(left=len(lines) - len(kept), what=what))
    return kept, budget


def _example(example: Mapping[str, Any]) -> str:
    pod = code(example["pod"])
    if example["verb"] == "prioritize":
        return f"{pod} prioritize: top node {code(example['topBefore'])} → {code(example['topAfter'])}"
    parts = []
    if example["lost"]:
        parts.append("loses " + ", ".join(code(n) for n in example["lost"]))
    if example["gained"]:
        parts.append("gains " + ", ".join(code(n) for n in example["gained"]))
    text = f"{pod} filter: {'; '.join(parts)}"
    return text + (" **(unschedulable)**" if example["unschedulable"] else "")
