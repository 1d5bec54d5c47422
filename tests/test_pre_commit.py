"""The pre-commit hooks of .pre-commit-hooks.yaml, run by pre-commit itself on a sample rules repository.

The sample's .pre-commit-config.yaml names this repository at this working tree's commit (with uncommitted
changes to tracked files, a commit of them that `git stash create` makes, as `pre-commit try-repo` does), so
pre-commit installs it as it would from its Git URL: a virtual environment with rulesched and its dependencies,
made once for the module (about a minute and a half; marked `slow`). Then the hooks run on the founding rule set
with its RuleTest, on a broken expression, and on a failing case.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from tests.paths import REPO, RULES

pytestmark = pytest.mark.slow

HOOKS = REPO / ".pre-commit-hooks.yaml"


def sample_repository(root: Path) -> Path:
    """A Git repository of rules laid out as docs/guides/rules-in-git.md has it: rules/ and rules/tests/."""
    shutil.copy(RULES / "xy-least-cpu.yaml", root / "rules" / "xy-least-cpu.yaml")
    shutil.copytree(RULES / "tests" / "fixtures", root / "rules" / "tests" / "fixtures")
    shutil.copy(RULES / "tests" / "xy-least-cpu.yaml", root / "rules" / "tests" / "xy-least-cpu.yaml")
    subprocess.run(["git", "init", "--quiet", str(root)], check=True)
    return root


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@functools.cache
def revision() -> str:
    """This working tree as a commit pre-commit can fetch: HEAD when no tracked file changed (a clean clone, as
    in CI), else the commit `git stash create` makes of the changes."""
    if not _git("status", "--porcelain", "--untracked-files=no"):
        return _git("rev-parse", "HEAD")
    return _git("stash", "create") or _git("rev-parse", "HEAD")


def run_hooks(sample: Path, environment: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Every hook of this repository on every file of `sample`, as a rules repository's pre-commit runs them."""
    hooks = [{"id": hook["id"]} for hook in yaml.safe_load(HOOKS.read_text())]
    config = {"repos": [{"repo": str(REPO), "rev": revision(), "hooks": hooks}]}
    (sample / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    subprocess.run(["git", "add", "--all"], cwd=sample, check=True)
    pre_commit = str(Path(sys.executable).parent / "pre-commit")
    return subprocess.run(
        [pre_commit, "run", "--all-files", "--color", "never"],
        cwd=sample,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pre-commit's own cache in a temporary folder, shared by this module's runs (one install)."""
    return {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home"))}


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    (tmp_path / "rules" / "tests").mkdir(parents=True)
    return sample_repository(tmp_path)


def test_the_hooks_are_rulesched_check_and_test() -> None:
    hooks = {hook["id"]: hook for hook in yaml.safe_load(HOOKS.read_text())}
    assert {h: (hooks[h]["entry"], hooks[h]["args"]) for h in hooks} == {
        "rulesched-check": ("rulesched check", ["rules"]),
        "rulesched-test": ("rulesched test", ["rules/tests"]),
    }


def test_the_hooks_pass_on_good_rules(sample: Path, environment: dict[str, str]) -> None:
    done = run_hooks(sample, environment)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rulesched check" in done.stdout
    assert "rulesched test" in done.stdout


def test_the_check_hook_fails_on_a_broken_expression(sample: Path, environment: dict[str, str]) -> None:
    rule = sample / "rules" / "xy-least-cpu.yaml"
    rule.write_text(rule.read_text().replace("expression: -variables.cpuUsed", "expression: -variables.cpuUsd"))
    done = run_hooks(sample, environment)
    assert done.returncode == 1
    assert "rules/xy-least-cpu.yaml" in done.stdout
    assert "cpuUsd" in done.stdout


def test_the_test_hook_fails_on_a_failing_case(sample: Path, environment: dict[str, str]) -> None:
    test = sample / "rules" / "tests" / "xy-least-cpu.yaml"
    test.write_text(test.read_text().replace("best: k8s-node2", "best: k8s-node1", 1))
    done = run_hooks(sample, environment)
    assert done.returncode == 1
    assert "best: expected k8s-node1, actual k8s-node2" in done.stdout
