"""The benchmark figures kept as data (`bench/results/recorded.json`) render as the tables they were recorded
as (`python bench/results/render.py`), and the current figures docs/performance.md quotes come from them."""

from __future__ import annotations

import subprocess
import sys

from bench.results.render import load, main, render
from tests.paths import REPO


def test_a_measurement_renders_as_its_table_with_where_it_was_taken() -> None:
    measurement = {
        "name": "tiny",
        "title": "A tiny run",
        "date": "2026-11-28",
        "commit": "abc1234",
        "command": "python bench/run.py --quick",
        "note": "One run.",
        "columns": ["nodes", "p50"],
        "rows": [["100", "0.63"], ["500", ""]],
        "after": ["Peak RSS 112 MB."],
    }
    assert render(measurement).splitlines() == [
        "## A tiny run",
        "",
        "2026-11-28, commit `abc1234`: `python bench/run.py --quick`",
        "",
        "One run.",
        "",
        "| nodes | p50 |",
        "| --- | --- |",
        "| 100 | 0.63 |",
        "| 500 |  |",
        "",
        "Peak RSS 112 MB.",
    ]


def test_the_script_renders_every_saved_measurement() -> None:
    done = subprocess.run(
        [sys.executable, "bench/results/render.py"], cwd=REPO, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    measurements = load()
    assert len(measurements) >= 9
    titles = [line.removeprefix("## ") for line in done.stdout.splitlines() if line.startswith("## ")]
    assert titles == [m["title"] for m in measurements]
    for measurement in measurements:
        assert all(len(cells) == len(measurement["columns"]) for cells in measurement["rows"]), measurement["name"]
        assert "| " + " | ".join(measurement["rows"][-1]) + " |" in done.stdout


def test_an_unknown_measurement_is_refused_by_name() -> None:
    assert main(["--name", "no-such-run"]) == 2


PERFORMANCE = REPO / "docs" / "performance.md"
PAGE_LINES = 150
"""docs/performance.md gives the current figures, how to reproduce them and what they mean; the history is data."""


def test_the_performance_page_is_the_current_figures_only() -> None:
    assert len(PERFORMANCE.read_text(encoding="utf-8").splitlines()) <= PAGE_LINES


def test_the_names_mode_table_quotes_the_saved_measurement() -> None:
    """Each cell of the page's names-mode table is the saved run's (`names-house`, the column after the change)."""
    (saved,) = [m for m in load() if m["name"] == "names-house"]
    page = PERFORMANCE.read_text(encoding="utf-8")
    assert f"at commit `{saved['commit']}`" in page
    quoted = {(rules, nodes, pods): after for rules, nodes, pods, _before, after in saved["rows"]}
    for rules, nodes in sorted({(r, n) for r, n, _ in quoted}):
        cells = [quoted[rules, nodes, pods] for pods in ("replica", "new", "cold")]
        assert f"| {rules} | {nodes} | " + " | ".join(cells) + " |" in page, (rules, nodes)
