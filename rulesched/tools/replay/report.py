"""The impact report of `rulesched replay`: JSON, text for people, JUnit XML for CI; and `--fail-on`.

`--fail-on unschedulable>0,top_node_changed>=10` names counts of the report (`pods`,
`feasible_changed`, `unschedulable`, `schedulable_again`, `top_node_changed`) and a bound each; a count
past its bound makes the exit status 1 and is marked in every output.
"""

from __future__ import annotations

import operator
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.tools.recording_read import Recording
from rulesched.tools.replay.impact import Impact

METRICS = ("pods", "feasible_changed", "unschedulable", "schedulable_again", "top_node_changed")
_OPERATORS: dict[str, Callable[[int, int], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
}
_THRESHOLD = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|==|>|<)\s*(\d+)\s*$")


class ThresholdError(ValueError):
    """A `--fail-on` that cannot be read; the message says what is expected."""


@dataclass(frozen=True, slots=True)
class Threshold:
    """`metric op value`: the run fails when the count satisfies it (`unschedulable>0`)."""

    metric: str
    op: str
    value: int

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value}"

    def breached(self, counts: Mapping[str, int]) -> bool:
        return _OPERATORS[self.op](counts[self.metric], self.value)


def parse_thresholds(text: str) -> list[Threshold]:
    """`unschedulable>0,feasible_changed>=5` as thresholds."""
    found = []
    for part in [p for p in text.split(",") if p.strip()]:
        match = _THRESHOLD.match(part)
        if not match or match[1] not in METRICS:
            raise ThresholdError(
                f"--fail-on {part.strip()!r}: want METRIC>N (or >=, <, <=, ==) with METRIC one of {', '.join(METRICS)}"
            )
        found.append(Threshold(match[1], match[2], int(match[3])))
    return found


def report(
    recording: Recording, impact: Impact, rules: Mapping[str, str], thresholds: Sequence[Threshold]
) -> dict[str, Any]:
    """The whole report, as `--output json` prints it."""
    counts = impact.counts()
    return {
        "recording": {
            "path": str(recording.path),
            "segments": len(recording.segments),
            "truncatedSegments": list(recording.truncated),
        },
        "rules": dict(rules),
        "requests": {
            "filter": impact.requests["filter"],
            "prioritize": impact.requests["prioritize"],
            "skipped": impact.requests["skipped"],
        },
        "pods": counts["pods"],
        "feasibleChanged": counts["feasible_changed"],
        "unschedulable": counts["unschedulable"],
        "schedulableAgain": counts["schedulable_again"],
        "topNodeChanged": counts["top_node_changed"],
        "rejections": impact.rejections(),
        "examples": impact.examples(),
        "thresholds": [
            {"threshold": str(t), "actual": counts[t.metric], "breached": t.breached(counts)} for t in thresholds
        ],
    }


def breached(found: Mapping[str, Any]) -> list[str]:
    return [t["threshold"] for t in found["thresholds"] if t["breached"]]


def render_text(found: Mapping[str, Any]) -> str:
    """The report for people."""
    requests = found["requests"]
    recording = found["recording"]
    total = requests["filter"] + requests["prioritize"]
    lines = [
        f"replayed {total} calls ({requests['filter']} filter, {requests['prioritize']} prioritize) of "
        f"{found['pods']} pods from {recording['path']} ({_count(recording['segments'], 'segment')})",
        f"rules: {found['rules']['new']} against {found['rules']['baseline']}",
        f"pods whose feasible nodes change: {found['feasibleChanged']}",
        f"pods that become unschedulable:   {found['unschedulable']}",
        f"pods that become schedulable:     {found['schedulableAgain']}",
        f"pods whose top node changes:      {found['topNodeChanged']}",
    ]
    if requests["skipped"]:
        lines.append(f"skipped: {requests['skipped']} calls cut short by the request deadline when recorded")
    if recording["truncatedSegments"]:
        lines.append(f"cut short (read up to where they end): {', '.join(recording['truncatedSegments'])}")
    if found["rejections"]:
        lines.append("rejections per rule (before -> after):")
        width = max(len(row["rule"]) for row in found["rejections"])
        lines += [f"  {row['rule']:<{width}}  {row['before']} -> {row['after']}" for row in found["rejections"]]
    if found["examples"]:
        lines.append("biggest changes:")
        lines += [f"  {_example(e)}" for e in found["examples"]]
    for threshold in found["thresholds"]:
        state = "BREACHED" if threshold["breached"] else "ok"
        lines.append(f"fail-on {threshold['threshold']}: {threshold['actual']} ({state})")
    return "\n".join(lines) + "\n"


def _example(example: Mapping[str, Any]) -> str:
    if example["verb"] == "prioritize":
        return f"{example['pod']} prioritize: top node {example['topBefore']} -> {example['topAfter']}"
    parts = []
    if example["lost"]:
        parts.append("loses " + ", ".join(example["lost"]))
    if example["gained"]:
        parts.append("gains " + ", ".join(example["gained"]))
    text = f"{example['pod']} filter: {'; '.join(parts)}"
    return text + (" (unschedulable)" if example["unschedulable"] else "")


def render_junit(found: Mapping[str, Any]) -> str:
    """JUnit XML: one testcase per `--fail-on` threshold (a failure when breached), the text report as the
    suite's output; with no threshold, one passing testcase `impact`."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name="rulesched replay")
    cases = found["thresholds"] or [{"threshold": "impact", "actual": None, "breached": False}]
    for threshold in cases:
        case = ET.SubElement(suite, "testcase", classname="rulesched.replay", name=threshold["threshold"])
        if threshold["breached"]:
            failure = ET.SubElement(case, "failure", message=f"{threshold['threshold']}: {threshold['actual']}")
            failure.text = render_text(found)
    ET.SubElement(suite, "system-out").text = render_text(found)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for t in cases if t["breached"])))
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
