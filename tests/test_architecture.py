"""The layering of docs/architecture.md, enforced: import directions, the seams between parts, one owner per library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import REPO

PACKAGE = REPO / "rulesched"

# package prefix → rulesched packages it must not import
FORBIDDEN_LAYERS = {
    "rulesched.rules": (
        "rulesched.decide",
        "rulesched.cluster",
        "rulesched.extender",
        "rulesched.tools",
        "rulesched.cli",
    ),
    "rulesched.decide": ("rulesched.cluster", "rulesched.extender", "rulesched.tools", "rulesched.cli"),
    "rulesched.cluster": ("rulesched.extender", "rulesched.tools", "rulesched.cli"),
    # The HTTP edge does not stand on the command-line wing: a Decision explains itself.
    "rulesched.extender": ("rulesched.tools", "rulesched.cli"),
    # The rule authors' tools stand beside the HTTP edge, not on it (a recording's format is shared below both).
    "rulesched.tools": ("rulesched.cli", "rulesched.extender"),
    "rulesched.recording_format": ("rulesched.rules", "rulesched.decide", "rulesched.cluster", "rulesched.extender"),
    # The two CEL engines never import each other; make_engine() composes them.
    "rulesched.rules.cel.cpp": ("rulesched.rules.cel.celpy_engine", "rulesched.rules.cel.celpy_functions"),
    "rulesched.rules.cel.celpy_engine": ("rulesched.rules.cel.cpp",),
    "rulesched.rules.cel.celpy_functions": ("rulesched.rules.cel.cpp", "rulesched.rules.cel.celpy_engine"),
    "rulesched.rules.cel.celpy_macros": ("rulesched.rules.cel.cpp", "rulesched.rules.cel.celpy_engine"),
    "rulesched.rules.cel.celpy_errors": ("rulesched.rules.cel.cpp", "rulesched.rules.cel.celpy_engine"),
    # The CEL libraries are plain Python that both engines register: they know no engine.
    "rulesched.rules.cel.libs": (
        "rulesched.rules.cel.cpp",
        "rulesched.rules.cel.celpy_engine",
        "rulesched.rules.cel.celpy_functions",
        "rulesched.rules.cel.celpy_optional",
        "rulesched.rules.cel.celpy_macros",
        "rulesched.rules.cel.celpy_errors",
        "rulesched.rules.cel.rewrite",
        "rulesched.rules.cel.dialect",
    ),
}

# third-party library → the only modules (prefixes) allowed to import it
OWNERS = {
    "cel_expr_python": ("rulesched.rules.cel",),
    "celpy": ("rulesched.rules.cel",),
    "lark": ("rulesched.rules.cel",),
    "re2": ("rulesched.rules.cel.libs.regex",),
    "kubernetes": ("rulesched.cluster", "rulesched.writes"),
    # A controller's own HTTP and metrics surface sits beside it, in its package.
    "starlette": ("rulesched.extender", "rulesched.controllers"),
    "uvicorn": ("rulesched.extender",),
    "prometheus_client": ("rulesched.extender", "rulesched.controllers"),
    "orjson": ("rulesched.extender", "rulesched.controllers"),
    "msgspec": ("rulesched.extender.wire", "rulesched.cluster.pod_metrics_wire"),
    "watchfiles": ("rulesched.rules.reloader",),
    "pydantic_settings": ("rulesched.settings",),
    "httpx": ("rulesched.cluster.prometheus",),
}


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path))
    return found


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return names


MODULES = modules()


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_module_respects_the_layers_and_library_owners(module: str, path: Path) -> None:
    found = imports(path)
    for layer, forbidden in FORBIDDEN_LAYERS.items():
        if module.startswith(layer):
            assert not [i for i in found if i.startswith(forbidden)], f"{module} imports a higher layer"
    for library, owners in OWNERS.items():
        users = [i for i in found if i == library or i.startswith(library + ".")]
        if users:
            assert module.startswith(owners), f"{module} imports {library}, owned by {', '.join(owners)}"


def graph() -> dict[str, set[str]]:
    """Each module of the package, and the modules of the package it imports (anywhere in it, type-checking
    and function-level imports included: a circle through any of them is still a circle)."""
    known = {name for name, _ in MODULES}
    return {name: (targets(path, known) - {name}) for name, path in MODULES}


def targets(path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `path` imports: `from package import module` is the module's import."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = {f"{node.module}.{alias.name}" for alias in node.names} & known
            names = [alias for alias in node.names if f"{node.module}.{alias.name}" not in known]
            found.update(modules)
            if names and node.module in known:
                found.add(node.module)
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `edges`: each strongly connected group of two modules or more (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(edges.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert circles(graph()) == []


def test_the_circle_check_sees_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]


def test_the_reference_evaluation_is_the_tests_oracle_only() -> None:
    """The fast engine shares the semantics module with the reference evaluation and never falls back on
    it; nothing in the package evaluates requests with the reference."""
    users = [m for m, p in MODULES if any(i.startswith("rulesched.decide.reference") for i in imports(p))]
    assert users == []


def test_the_layer_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "routes.py"
    module.write_text("from rulesched.tools import explain\nimport rulesched.cli\n")
    assert {"rulesched.tools.explain", "rulesched.cli"} <= imports(module)


def test_every_module_opens_with_a_docstring() -> None:
    missing = [m for m, p in MODULES if p.read_text().strip() and ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


MODULE_LINES = 400
"""No module of the package is longer: a longer one is split by what its parts do."""
PARAMETERS = 6
"""No function takes more parameters (`self` and `cls` not counted): more are a `Call`, a settings object, a
named tuple."""


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    arguments = function.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (arguments.vararg is not None) + (arguments.kwarg is not None)


def test_no_module_is_longer_than_the_limit() -> None:
    longer = sorted(m for m, p in MODULES if len(p.read_text().splitlines()) > MODULE_LINES)
    assert longer == [], f"over {MODULE_LINES} lines: {longer}"


def test_no_function_takes_more_parameters_than_the_limit() -> None:
    found = {
        (module, node.name)
        for module, path in MODULES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameters(node) > PARAMETERS
    }
    assert found == set(), f"over {PARAMETERS} parameters: {sorted(found)}"


def test_the_parameter_count_sees_every_kind_of_parameter() -> None:
    (function,) = ast.parse("def f(self, a, /, b, *c, d, **e): pass").body
    assert isinstance(function, ast.FunctionDef)
    assert parameters(function) == 5
