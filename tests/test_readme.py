"""The README's commands and examples are executed, so the documentation cannot drift from the code."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import httpx

from rulesched.settings import Settings
from tests.paths import REPO
from tests.server import running_server

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


def serve_settings() -> Settings:
    """The settings the README's run command asks for."""
    words = shlex.split(block_after("run-command")[0].split("&&")[-1])
    flags = dict(zip(words[2::2], words[3::2], strict=True))
    return Settings(
        rules_dir=REPO / flags["--rules"],
        nodes_file=REPO / flags["--nodes"],
        metrics_file=REPO / flags["--metrics"],
        cluster="off",
    )


def test_curl_examples_give_the_answers_shown() -> None:
    examples, answers = block_after("curl-example"), block_after("curl-answer")
    assert len(examples) == len(answers) >= 2
    with running_server(serve_settings()) as url:
        for example, shown in zip(examples, answers, strict=True):
            words = shlex.split(example)
            target = next(w for w in words if w.startswith("http://127.0.0.1:8888/"))
            body = words[words.index("-d") + 1]
            answer = httpx.post(url + target.removeprefix("http://127.0.0.1:8888"), content=body)
            assert answer.json() == json.loads(shown), example


def test_every_shipped_rule_file_is_in_the_readme_table() -> None:
    """In the README's table, or in a table of the documentation under docs/."""
    docs = "".join(p.read_text() for p in sorted((REPO / "docs").glob("**/*.md")))
    for path in sorted(Path(REPO / "rules").glob("*.yaml")):
        assert f"| `rules/{path.name}` |" in README + docs
