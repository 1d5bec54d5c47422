"""The `rulesched` command: `check` exit codes and output, `serve` start-up errors and a real start."""

from __future__ import annotations

import argparse
from pathlib import Path

import httpx
import pytest

from rulesched.cli import build_parser, main
from rulesched.cli.serve import settings_from
from rulesched.settings import Settings
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, RULES
from tests.server import spawned

BROKEN = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: broken
spec:
  filters:
  - name: syntax
    expression: "'filter.xy.com' in"
  - name: not-bool
    expression: "1 + 2"
  scores:
  - name: bad-weight
    expression: "1.0"
    weight: 0
"""


def test_check_accepts_the_shipped_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(RULES)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: 7 rule set(s) in 7 file(s)")


@pytest.mark.parametrize("engine", ["cpp", "celpy"])
def test_check_prints_every_error_one_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN)
    (tmp_path / "fine.yaml").write_text((RULES / "gpu-reserve.yaml").read_text())
    assert main(["check", str(tmp_path), "--cel-engine", engine]) == 1
    lines = capsys.readouterr().err.splitlines()
    file = str(tmp_path / "broken.yaml")
    assert lines[0].startswith(f"{file}:8: broken/syntax: spec.filters[0].expression: CEL: ")
    assert lines[0].endswith("""in "'filter.xy.com' in" at 1:19""")
    assert lines[1] == f"""{file}:10: broken/not-bool: spec.filters[1].expression: must be a bool, not int in '1 + 2'"""
    assert lines[2] == f"{file}:14: broken/bad-weight: spec.scores[0].weight: Input should be greater than 0"
    assert lines[3] == "3 error(s); nothing would be loaded"


def test_serve_rejects_invalid_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port: Input should be less than or equal to 65535" in capsys.readouterr().err


def test_serve_refuses_to_start_on_broken_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN)
    assert main(["serve", "--rules", str(tmp_path), "--cluster", "off"]) == 1
    err = capsys.readouterr().err
    assert "do not load" in err
    assert "broken/syntax" in err


def test_serve_refuses_a_missing_rules_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--rules", str(tmp_path / "nope"), "--cluster", "off"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_python_dash_m_rulesched_serves_the_example(tmp_path: Path) -> None:
    options = ["--nodes", str(EXAMPLE_NODES), "--metrics", str(EXAMPLE_METRICS), "--log-format", "text"]
    log = tmp_path / "serve.log"
    with spawned(options, log) as port:
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert ready.json()["ready"] is True
    assert "serving 7 rule sets" in log.read_text()


def serve_actions() -> dict[str, argparse.Action]:
    """The `serve` subcommand's arguments by destination."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {action.dest: action for action in commands.choices["serve"]._actions if action.dest != "help"}


def test_every_setting_has_a_serve_flag_and_every_serve_flag_is_a_setting() -> None:
    assert set(serve_actions()) == set(Settings.model_fields)


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_a_serve_flags_help_is_its_settings_docstring(name: str) -> None:
    description = Settings.model_fields[name].description
    assert description, f"Settings.{name} has no docstring"
    assert serve_actions()[name].help == description


def test_serve_help_shows_each_default_and_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--port N TCP port to listen on. [default: 8888; env RULESCHED_PORT]" in help_text
    assert "--rules PATH, --rules-dir PATH" in help_text


def parse_serve(argv: list[str]) -> Settings:
    return settings_from(build_parser().parse_args(["serve", *argv]))


def test_a_flag_overrides_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RULESCHED_PORT", "9000")
    monkeypatch.setenv("RULESCHED_ENABLE_EXPLAIN", "true")
    monkeypatch.setenv("RULESCHED_RULES_DIR", "from-env")
    assert (parse_serve([]).port, parse_serve([]).enable_explain) == (9000, True)
    settings = parse_serve(["--port", "9100", "--no-enable-explain", "--rules", "from-flag"])
    assert (settings.port, settings.enable_explain, settings.rules_dir) == (9100, False, (Path("from-flag"),))


def test_rules_repeat_as_flags_and_separate_with_commas_in_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_serve([]).rules_dir == (Path("rules"),)
    monkeypatch.setenv("RULESCHED_RULES_DIR", "/etc/rules,/etc/more-rules")
    assert parse_serve([]).rules_dir == (Path("/etc/rules"), Path("/etc/more-rules"))
    assert parse_serve(["--rules", "a", "--rules", "b.yaml"]).rules_dir == (Path("a"), Path("b.yaml"))


def test_without_flags_or_variables_the_models_defaults_apply() -> None:
    assert parse_serve([]) == Settings()


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--rules", "r"], "rules_dir", (Path("r"),)),
        (["--rules-dir", "r"], "rules_dir", (Path("r"),)),
        (["--nodes", "n.yaml"], "nodes_file", Path("n.yaml")),
        (["--metrics-file", "m.yaml"], "metrics_file", Path("m.yaml")),
        (["--enable-bind"], "enable_bind", True),
        (["--cel-engine", "celpy"], "cel_engine", "celpy"),
        (["--metrics-interval", "2.5"], "metrics_interval", 2.5),
        (["--reload-interval", "5"], "reload_interval", 5.0),
    ],
)
def test_documented_flags_and_their_long_forms_set_their_setting(argv: list[str], field: str, value: object) -> None:
    assert getattr(parse_serve(argv), field) == value


def test_a_bad_choice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--cluster", "sometimes"])
    assert exited.value.code == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err
