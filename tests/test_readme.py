"""The README opens with the two commands CI runs; its examples run in tests/test_docs.py with the docs'."""

from __future__ import annotations

import re
from pathlib import Path

from tests.paths import REPO

README = (REPO / "README.md").read_text()


def block_after(marker: str) -> list[str]:
    """The fenced code blocks that follow each `<!-- marker -->` line."""
    return re.findall(rf"<!-- {marker} -->\n```\w*\n(.*?)\n```", README, re.DOTALL)


def test_readme_starts_with_the_run_and_test_commands() -> None:
    first_blocks = re.findall(r"```\w*\n(.*?)\n```", README, re.DOTALL)[:2]
    assert first_blocks == [block_after("run-command")[0], block_after("test-command")[0]]
    assert "pip install ." in first_blocks[0]
    assert "rulesched serve" in first_blocks[0]
    assert "pytest" in first_blocks[1]


def test_ci_runs_the_readme_test_command() -> None:
    script = (REPO / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in script


def test_every_shipped_rule_file_is_in_the_rule_files_page() -> None:
    page = (REPO / "docs" / "rules" / "language.md").read_text()
    for path in sorted(Path(REPO / "rules").glob("*.yaml")):
        assert f"`rules/{path.name}`" in page
