"""The runnable examples of docs/rules/cluster-context.md and docs/guides/burst.md are executed.

(A focused harness for these two pages: `<!-- doc-test -->` shell blocks of `rulesched` commands must exit 0,
`<!-- doc-test: rules -->` YAML blocks must load as rule files on both engines.)
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.rules.cel import ENGINE_NAMES, EngineName, make_engine
from rulesched.rules.loader import load_rule_book
from tests.paths import REPO

PAGES = [REPO / "docs" / "rules" / "cluster-context.md", REPO / "docs" / "guides" / "burst.md"]


def blocks(marker: str) -> list[str]:
    return [
        block
        for page in PAGES
        for block in re.findall(rf"<!-- {re.escape(marker)} -->\n```\w*\n(.*?)\n```", page.read_text(), re.DOTALL)
    ]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_rule_examples_load(tmp_path: Path, engine: EngineName) -> None:
    examples = blocks("doc-test: rules")
    assert len(examples) >= 2
    for index, text in enumerate(examples):
        (tmp_path / f"example-{index}.yaml").write_text(text + "\n")
    book = load_rule_book([tmp_path], make_engine(engine))
    assert len(book.rule_sets) == len(examples)


def test_command_examples_exit_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    commands = [line for block in blocks("doc-test") for line in block.splitlines() if line.strip()]
    assert commands
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "rulesched"
        assert main(words[1:]) == 0, command


def test_the_burst_guide_shows_the_shipped_founding_estimate() -> None:
    guide = (REPO / "docs" / "guides" / "burst.md").read_text()
    assert "metrics.cpu.usage + recent.estimates.cpu" in (REPO / "rules" / "xy-least-cpu.yaml").read_text()
    assert "expression: metrics.cpu.usage + recent.estimates.cpu" in guide
