"""Every marked example in docs/ (and the README) runs; every relative link resolves; the settings page is current.

Markers, each on the line before a fenced block:
- `<!-- doc-test -->` before ```sh: each line is a `rulesched …` command run from the repository root;
  it must exit 0 (`<!-- doc-test exit=1 -->`: exit 1). A line ending in `\\` continues on the next.
- `<!-- doc-test: console -->` before ```console: `$ rulesched …` lines, each followed by exactly the
  output it prints (standard output and standard error, in that order).
- `<!-- doc-test: rules -->` before ```yaml: a complete rule file, which must load (`rulesched check`).
- `<!-- doc-test: excerpt PATH -->`: the block's lines stand in the repository file PATH, in that order
  (a line's trailing comment, in the block or in PATH, aside).
- `<!-- doc-test: scheduler-config -->`: a KubeSchedulerConfiguration with only fields a real scheduler reads.
- `<!-- doc-test: ruletest-fields -->`: a RuleTest whose every field is one the RuleTest format has.
- `<!-- doc-test: json-shape COMMAND -->`: JSON whose every key is in what `rulesched COMMAND` prints.
- `<!-- curl-example -->` + `<!-- curl-answer -->`: a request to the README's server and its exact answer.
- `<!-- not-run: REASON -->`: a block no test can run here (it needs a cluster, Docker, or a server's
  history), with the reason and what tests it instead. Every fenced block carries one of these markers.
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from rulesched.cli import main
from rulesched.cli.reference import configuration_reference
from rulesched.settings import Settings
from rulesched.tools.ruletest.model import RuleTest
from tests.paths import REPO
from tests.server import running_server
from tests.tools.test_config_scheduler import assert_only_known_fields

DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", *DOCS.rglob("*.md")])
CONFIGURATION = DOCS / "operations" / "configuration.md"


@dataclass(frozen=True)
class Block:
    """A fenced block after a marker: where it is, the marker's argument and the block's text."""

    page: Path
    line: int
    marker: str
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(marker: str, pages: list[Path] = PAGES) -> list[Block]:
    """Every fenced block following `<!-- marker… -->` (the marker's rest, e.g. `exit=1`, kept)."""
    found = []
    pattern = re.compile(rf"<!-- {re.escape(marker)}(?P<rest>[^>]*?)-->\n```[\w-]*\n(?P<text>.*?)\n```", re.DOTALL)
    for page in pages:
        source = page.read_text()
        for match in pattern.finditer(source):
            line = source.count("\n", 0, match.start()) + 1
            found.append(Block(page, line, match["rest"].strip(), match["text"]))
    return found


def commands(text: str) -> list[str]:
    """The command lines of a block, continuation lines joined, comments and blank lines dropped."""
    joined = text.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def run(command: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    words = shlex.split(command)
    assert words[0] == "rulesched", f"a doc-test runs rulesched commands only, not {command!r}"
    capsys.readouterr()
    try:
        status = main(words[1:])
    except SystemExit as exited:  # --help, or a usage error found by argparse
        status = exited.code if isinstance(exited.code, int) else 2
    captured = capsys.readouterr()
    return status, captured.out + captured.err


SH_BLOCKS = [b for b in blocks("doc-test") if not b.marker.startswith(":")]
CONSOLE_BLOCKS = blocks("doc-test: console")
RULE_BLOCKS = blocks("doc-test: rules")
EXCERPT_BLOCKS = blocks("doc-test: excerpt")
SCHEDULER_CONFIG_BLOCKS = blocks("doc-test: scheduler-config")
RULETEST_BLOCKS = blocks("doc-test: ruletest-fields")
JSON_SHAPE_BLOCKS = blocks("doc-test: json-shape")
MARKERS = ("doc-test", "curl-example", "curl-answer", "run-command", "test-command", "shadow-summary", "not-run:")
"""`shadow-summary` is checked against a real server by tests/test_shadow_guide.py."""


@pytest.mark.parametrize("block", SH_BLOCKS, ids=str)
def test_documented_commands_exit_as_shown(
    block: Block, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    expected = int(block.marker.removeprefix("exit=")) if block.marker else 0
    for command in commands(block.text):
        status, output = run(command, capsys)
        assert status == expected, f"{block}: {command!r} exited {status}:\n{output}"


def console_session(text: str) -> list[tuple[str, str]]:
    """(command, the output shown under it) for each `$ ` line of a console block."""
    session: list[tuple[str, list[str]]] = []
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith("$ "):
            session.append((line[2:].strip(), []))
        else:
            assert session, f"output before any command: {line!r}"
            session[-1][1].append(line)
    return [(command, "\n".join(lines)) for command, lines in session]


@pytest.mark.parametrize("block", CONSOLE_BLOCKS, ids=str)
def test_documented_sessions_print_what_is_shown(
    block: Block, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    for command, shown in console_session(block.text):
        _, output = run(command, capsys)
        assert output.rstrip("\n") == shown, f"{block}: {command!r}"


@pytest.mark.parametrize("block", RULE_BLOCKS, ids=str)
def test_documented_rule_files_load(block: Block, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "example.yaml").write_text(block.text + "\n")
    status, output = run(f"rulesched check {tmp_path}", capsys)
    assert status == 0, f"{block}:\n{output}"


@pytest.mark.parametrize("block", EXCERPT_BLOCKS, ids=str)
def test_documented_excerpts_stand_in_their_file(block: Block) -> None:
    lines = iter(line.split("  # ")[0].rstrip() for line in (REPO / block.marker).read_text().splitlines())
    for shown in (line.split("  # ")[0].rstrip() for line in block.text.splitlines()):
        assert any(line == shown for line in lines), f"{block}: {shown!r} is not in {block.marker} (in this order)"


@pytest.mark.parametrize("block", SCHEDULER_CONFIG_BLOCKS, ids=str)
def test_documented_scheduler_configurations_use_known_fields(block: Block) -> None:
    assert_only_known_fields(yaml.safe_load(block.text))


@pytest.mark.parametrize("block", RULETEST_BLOCKS, ids=str)
def test_documented_ruletests_use_the_format_fields(block: Block) -> None:
    RuleTest.model_validate(yaml.safe_load(block.text))


def keys_missing(shown: object, actual: object, path: str = "") -> list[str]:
    """The keys of `shown` (a documented JSON value, `"…"` standing for elided items) not in `actual`."""
    if isinstance(shown, dict) and isinstance(actual, dict):
        missing = [f"{path}.{k}" for k in shown if k not in actual]
        return missing + [m for k in shown if k in actual for m in keys_missing(shown[k], actual[k], f"{path}.{k}")]
    if isinstance(shown, list) and isinstance(actual, list) and actual:
        return [m for item in shown if item != "…" for m in keys_missing(item, actual[0], f"{path}[]")]
    return []


@pytest.mark.parametrize("block", JSON_SHAPE_BLOCKS, ids=str)
def test_documented_json_has_the_shape_the_command_prints(
    block: Block, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    status, output = run(block.marker, capsys)
    assert status == 0, output
    assert keys_missing(json.loads(block.text), json.loads(output)) == [], str(block)


def test_the_shape_check_sees_a_key_that_is_not_printed() -> None:
    shown = {"nodes": [{"name": "a", "scores": [{"raw": 1, "bogus": 2}]}, "…"]}
    actual = {"nodes": [{"name": "a", "scores": [{"raw": 1}]}]}
    assert keys_missing(shown, actual) == [".nodes[].scores[].bogus"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_fenced_block_is_run_or_says_why_not(page: Path) -> None:
    lines = page.read_text().splitlines()
    opening = [i for i, line in enumerate(lines) if line.startswith("```") and line != "```"]
    unmarked = [i + 1 for i in opening if not lines[i - 1].startswith(tuple(f"<!-- {m}" for m in MARKERS))]
    assert unmarked == [], f"{page.relative_to(REPO)}: blocks at lines {unmarked} have no doc-test or not-run marker"
    reasons = re.findall(r"<!-- not-run:(.*?)-->", page.read_text())
    assert all(len(r.strip()) > 10 for r in reasons), "a not-run marker says why"


def test_the_docs_have_examples_of_every_kind() -> None:
    assert len(SH_BLOCKS) >= 5
    assert len(CONSOLE_BLOCKS) >= 3
    assert len(RULE_BLOCKS) >= 2


def readme_server_settings() -> Settings:
    """The settings the README's run command asks for."""
    readme = (REPO / "README.md").read_text()
    run_command = re.findall(r"<!-- run-command -->\n```\w*\n(.*?)\n```", readme, re.DOTALL)[0]
    words = shlex.split(run_command.split("&&")[-1])
    flags = dict(zip(words[2::2], words[3::2], strict=True))
    return Settings(
        rules_dir=REPO / flags["--rules"],
        nodes_file=REPO / flags["--nodes"],
        metrics_file=REPO / flags["--metrics"],
        pods_file=REPO / flags["--pods"] if "--pods" in flags else None,
        namespaces_file=REPO / flags["--namespaces"] if "--namespaces" in flags else None,
        cluster="off",
    )


def test_curl_examples_give_the_answers_shown() -> None:
    examples, answers = blocks("curl-example"), blocks("curl-answer")
    assert [e.page for e in examples] == [a.page for a in answers], "every curl-example needs its curl-answer"
    assert len(examples) >= 2
    with running_server(readme_server_settings()) as url:
        for example, shown in zip(examples, answers, strict=True):
            words = shlex.split(example.text)
            target = next(w for w in words if w.startswith("http://127.0.0.1:8888/"))
            body = words[words.index("-d") + 1]
            answer = httpx.post(url + target.removeprefix("http://127.0.0.1:8888"), content=body)
            assert answer.json() == json.loads(shown.text), str(example)


def test_the_configuration_page_is_generated_from_the_settings() -> None:
    assert CONFIGURATION.read_text() == configuration_reference(), (
        "regenerate it: rulesched config reference > docs/operations/configuration.md"
    )


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.DOTALL)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = unicodedata.normalize("NFKC", heading.strip().lower()).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(FENCE.sub("", page.read_text())) if not re.match(r"\w+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if (
            not resolved.exists()
            or not resolved.is_relative_to(REPO)
            or (fragment and resolved.suffix == ".md" and fragment not in anchors(resolved))
        ):
            broken.append(target)
    assert broken == []


def test_every_docs_page_is_reachable_from_the_index() -> None:
    seen, queue = set(), [DOCS / "index.md"]
    while queue:
        page = queue.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        queue.extend((page.parent / t.partition("#")[0]).resolve() for t in links(page) if t.partition("#")[0])
    assert sorted(p.relative_to(REPO) for p in DOCS.rglob("*.md") if p not in seen) == []


def test_the_readme_links_the_docs_index() -> None:
    assert "(docs/index.md)" in (REPO / "README.md").read_text()


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
