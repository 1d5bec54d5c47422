"""The explain report as aligned text: a header, one block per node, and the ranking at the end.

It reads only the report (the JSON shape of `explain_report`), so a report from a server prints the
same as one computed locally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Row = Sequence[str]


def align(rows: Sequence[Row], indent: str = "  ") -> list[str]:
    """Rows as lines with every column padded to its widest cell (the last one is not padded)."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows), default=0))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + list(row[-1:])
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _number(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def _filter_rows(filters: Sequence[Mapping[str, Any]]) -> list[Row]:
    rows: list[Row] = [("FILTER", "MODE", "RESULT", "DETAIL")]
    for item in filters:
        outcome = str(item["outcome"])
        detail = item.get("error") if outcome == "error" else item.get("message")
        result = outcome if outcome in ("pass", "skipped") else outcome.upper()
        rows.append((f"{item['ruleSet']}/{item['rule']}", str(item["mode"]), result, str(detail or "")))
    return rows


def _score_rows(scores: Sequence[Mapping[str, Any]]) -> list[Row]:
    rows: list[Row] = [("SCORE", "MODE", "RAW", "NORMALIZED", "WEIGHT", "ERROR")]
    errors = any(item.get("error") for item in scores)
    for item in scores:
        raw = "error" if item.get("error") else _number(item.get("raw"), ".6g")
        rows.append(
            (
                f"{item['ruleSet']}/{item['rule']}",
                str(item["mode"]),
                raw,
                _number(item.get("normalized"), ".2f"),
                _number(item.get("weight"), "g"),
                str(item.get("error") or ""),
            )
        )
    return rows if errors else [row[:-1] for row in rows]


def _verdict(node: Mapping[str, Any]) -> str:
    if node.get("passed"):
        return f"{node['name']}: passed, score {node.get('score')}"
    hint = "preemption may help" if node.get("resolvableByPreemption") else "preemption will not help"
    return f"{node['name']}: REJECTED: {node.get('reason')} [{hint}]"


def node_block(node: Mapping[str, Any]) -> list[str]:
    """One node: its verdict, every filter's outcome, then every score rule's values."""
    lines = [_verdict(node)]
    filters, scores = node.get("filters") or [], node.get("scores") or []
    lines += align(_filter_rows(filters)) if filters else ["  no filters applied"]
    if scores:
        lines += align(_score_rows(scores))
    elif node.get("passed"):
        lines.append("  no score rules applied")
    else:
        lines.append("  not scored: rejected")
    return lines


def _age(age: object) -> str:
    return f"age {age:.0f}s" if isinstance(age, (int, float)) else "from a file"


def custom_lines(custom: Mapping[str, Any]) -> list[str]:
    """The node's custom metric values (`metrics.custom`) with their ages; none when it has none."""
    if not custom:
        return []
    rows: list[Row] = [("CUSTOM METRIC", "VALUE", "AGE")]
    rows += [
        (f"metrics.custom.{name}", _number(v.get("value"), ".6g"), _age(v.get("age"))) for name, v in custom.items()
    ]
    return align(rows)


def _header(report: Mapping[str, Any]) -> list[str]:
    pod = report.get("pod") or {}
    applied = ", ".join(report.get("appliedRuleSets") or []) or "none (every node passes, every score is 0)"
    return [
        f"Pod {pod.get('namespace')}/{pod.get('name')} (uid {pod.get('uid') or '-'})",
        f"Rule sets applied: {applied} (rules generation {report.get('generation')})",
    ]


def _footer(report: Mapping[str, Any]) -> list[str]:
    ranking = report.get("ranking") or []
    rows: list[Row] = [(f"{i}.", str(n["name"]), f"score {n['score']}") for i, n in enumerate(ranking, 1)]
    lines = ["Ranking (best first):", *(align(rows) if rows else ["  no node passed"])]
    rejected = [str(n["name"]) for n in report.get("nodes") or [] if not n.get("passed")]
    if rejected:
        lines.append(f"Rejected: {', '.join(rejected)}")
    unknown = report.get("unknownNodes") or {}
    if unknown:
        lines.append("Not evaluated (unknown to the server):")
        reasons = unknown if isinstance(unknown, Mapping) else dict.fromkeys(unknown, "")
        lines += align([(f"{name}:", str(reason)) for name, reason in reasons.items()])
    errors = report.get("errors") or []
    if errors:
        lines.append(f"Evaluation errors ({len(errors)}):")
        lines += [f"  {e.get('node') or '(pod)'}: {e['ruleSet']}/{e['rule']}: {e['error']}" for e in errors]
    return lines


def render_table(report: Mapping[str, Any]) -> str:
    """The whole report as text, ending with a newline."""
    lines = _header(report)
    contexts = report.get("nodeContext") or {}
    for node in report.get("nodes") or []:
        lines += ["", *node_block(node), *custom_lines((contexts.get(node.get("name")) or {}).get("custom") or {})]
    lines += ["", *_footer(report)]
    return "\n".join(lines) + "\n"
