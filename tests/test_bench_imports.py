"""No import circle anywhere in the repository's Python: the package, the benchmark scripts (`bench/`) and the
tests, as one graph (tests/test_architecture.py checks the package alone, with its layers)."""

from __future__ import annotations

from pathlib import Path

from tests.paths import REPO
from tests.test_architecture import circles, targets

ROOTS = ("rulesched", "bench", "tests")


def modules(repo: Path, roots: tuple[str, ...] = ROOTS) -> dict[str, Path]:
    """Every module under `roots` by its dotted name (a package by its own name, from its `__init__.py`)."""
    found = {}
    for root in roots:
        for path in sorted((repo / root).rglob("*.py")):
            if "fixtures" in path.relative_to(repo).parts:
                continue
            parts = path.relative_to(repo).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def graph(repo: Path, roots: tuple[str, ...] = ROOTS) -> dict[str, set[str]]:
    """Each module and the modules under `roots` it imports (function-level imports included)."""
    found = modules(repo, roots)
    known = set(found)
    return {name: targets(path, known) - {name} for name, path in found.items()}


def test_no_module_of_the_package_the_benchmark_or_the_tests_imports_itself_through_others() -> None:
    edges = graph(REPO)
    assert any(name.startswith("bench.") for name in edges), "the benchmark's modules are in the graph"
    assert circles(edges) == []


def test_the_check_sees_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    """As `bench/run.py` and `bench/shadow.py` were: one imports the other at the top, the other imports it back
    inside a function."""
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "__init__.py").write_text("")
    (bench / "run.py").write_text("def main() -> None:\n    from bench import shadow\n")
    (bench / "shadow.py").write_text("from bench.run import main\n")
    (bench / "harness.py").write_text("import bench.run\n")
    assert circles(graph(tmp_path, ("bench",))) == [["bench.run", "bench.shadow"]]
