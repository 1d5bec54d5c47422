"""The report of `rulesched tune`: text for people and Markdown for a pull-request comment (JSON is the
report itself, `tune.report`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rulesched.tools.replay.markdown import code

ROWS = 200
"""The most score rules the Markdown report lists (each row within 150 characters: well within a comment)."""
FIGURES = ("max/mean", "stddev", "empty", "over", "unschedulable", "spread")


def _weights(side: Mapping[str, Any]) -> str:
    weights = side["weights"]
    rules = ", ".join(f"{name}={value:g}" for name, value in weights["rules"].items()) or "no score rules"
    return f"{rules}; extender weight {weights['extender']:g}"


def _figures(figures: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {figures[name]:.3f}" for name in FIGURES if name in figures)


def render_text(found: Mapping[str, Any]) -> str:
    """The report for people."""
    search = found["search"]
    lines = [
        f"tuned for {found['objective']} over {found['pods']} pods on {found['nodes']} nodes "
        f"({search['tried']} weight sets x {search['seeds']} seeds in {search['seconds']:.1f} s"
        f"{', cut short by --max-seconds' if search['cutShort'] else ''})",
        f"current: {_weights(found['current'])}",
        f"  {_figures(found['current']['figures'])}",
        f"best:    {_weights(found['best'])}",
        f"  {_figures(found['best']['figures'])}",
    ]
    if found["heldOut"]:
        lines.append(
            "with the held-out half (tuned on the first half of the arrivals; every arrival placed with each):"
        )
        lines += [f"  {name}: {_figures(found['heldOut'][name])}" for name in ("current", "best")]
    verdict = "proposed" if found["proposed"] else "kept the current weights"
    lines.append(f"{verdict}: {found['reason']}; pods that land elsewhere: {found['podsMoved']}")
    if found["proposed"]:
        lines.append(f"extenders[].weight for the scheduler configuration: {found['chosen']['weights']['extender']:g}")
    return "\n".join(lines) + "\n"


def render_markdown(found: Mapping[str, Any]) -> str:
    """The report as GitHub-flavoured Markdown: a headline, the figures side by side, the weights."""
    mark = "✅" if found["proposed"] else "⏸️"
    verdict = "new weights proposed" if found["proposed"] else "the current weights are kept"
    search = found["search"]
    lines = [
        f"### {mark} rulesched tune ({found['objective']}): {verdict}",
        "",
        f"{found['pods']} pods on {found['nodes']} nodes, {search['tried']} weight sets x {search['seeds']} seeds "
        f"(seed {search['seed']}). {_plain(found['reason'])}; pods that land elsewhere: {found['podsMoved']}.",
        "",
        "| figure | current | best |" + (" held-out current | held-out best |" if found["heldOut"] else ""),
        "|---|---:|---:|" + ("---:|---:|" if found["heldOut"] else ""),
    ]
    for name in FIGURES:
        row = f"| {name} | {found['current']['figures'][name]:.3f} | {found['best']['figures'][name]:.3f} |"
        if found["heldOut"]:
            row += f" {found['heldOut']['current'][name]:.3f} | {found['heldOut']['best'][name]:.3f} |"
        lines.append(row)
    lines += ["", "| weight | current | best |", "|---|---:|---:|"]
    current, best = found["current"]["weights"], found["best"]["weights"]
    lines.append(f"| `extenders[].weight` | {current['extender']:g} | {best['extender']:g} |")
    # The changed weights first; at most ROWS rows (a name at most `code`'s width), so the comment stays short.
    rows = sorted(current["rules"].items(), key=lambda item: best["rules"].get(item[0], item[1]) == item[1])
    for name, value in rows[:ROWS]:
        lines.append(f"| {code(name)} | {value:g} | {best['rules'].get(name, value):g} |")
    if len(rows) > ROWS:
        lines.append(f"\n… {len(rows) - ROWS} more score rules not shown: `rulesched tune --output json` has them all.")
    return "\n".join(lines) + "\n"


def _plain(text: str) -> str:
    return "".join(f"\\{c}" if c in "\\`*_[]<>|#" else c for c in text)
