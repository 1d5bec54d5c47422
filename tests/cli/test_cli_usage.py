"""The command line as a new user meets it: `--version`, usage errors, help texts, `schema`, `explain -o text`."""

from __future__ import annotations

import importlib.metadata

import pytest

from rulesched.cli import main
from rulesched.cli.serve import UNITS, field_type
from rulesched.settings import Settings
from rulesched.tools.schemas import KINDS
from tests.paths import EXAMPLE_NODES, EXAMPLES, RULES


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"rulesched {importlib.metadata.version('rulesched')}\n"


def test_schema_without_a_kind_lists_the_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == list(KINDS)


@pytest.mark.parametrize("command", [["check"], ["explain"], ["test", "rules/tests"], ["serve"]])
def test_an_unknown_argument_prints_the_subcommand_s_usage(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--no-such-flag"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: rulesched {command[0]} ")
    assert err.endswith(f"rulesched {command[0]}: error: unrecognized arguments: --no-such-flag\n")


def test_explain_takes_text_like_the_other_commands(capsys: pytest.CaptureFixture[str]) -> None:
    files = ["--rules", str(RULES), "--pod", str(EXAMPLES / "pod.json"), "--nodes", str(EXAMPLE_NODES)]
    assert main(["explain", *files, "-o", "table"]) == 0
    table = capsys.readouterr().out
    assert main(["explain", *files, "-o", "text"]) == 0
    assert capsys.readouterr().out == table
    assert main(["explain", *files]) == 0
    assert capsys.readouterr().out == table


def test_every_number_flag_says_what_its_number_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--loop-work MICROSECONDS" in text
    assert "--shadow-inline-work MICROSECONDS" in text
    assert "--requeue-rate PER_SECOND" in text
    assert "--deschedule-rate PER_MINUTE" in text
    assert "--usage-quantile NUMBER" in text
    assert "--usage-fallback-factor NUMBER" in text
    for name, field in Settings.model_fields.items():
        if field_type(field) is float and name not in UNITS:  # shown as SECONDS: its text must say so
            assert "seconds" in (field.description or "").lower() or name.endswith("_seconds"), name


def test_defaults_print_as_a_user_writes_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "[default: 2000; env RULESCHED_LOOP_WORK]" in text
    assert "[default: 0.5; env RULESCHED_RELOAD_DEBOUNCE]" in text
    assert '[default: ""; env RULESCHED_LEASE_IDENTITY]' in text
    assert "[default: kube-system; env RULESCHED_DESCHEDULE_EXCLUDED_NAMESPACES]" in text
    assert ".0;" not in text
