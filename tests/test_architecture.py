"""The layering of docs/architecture.md, enforced: import directions, the seams between parts, one owner per library."""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
from pathlib import Path

import pytest

from tests.paths import REPO

PACKAGE = REPO / "rulesched"

ABOVE_DECIDE = (
    "rulesched.handoff",
    "rulesched.cluster",
    "rulesched.writes",
    "rulesched.controllers",
    "rulesched.extender",
    "rulesched.tools",
    "rulesched.cli",
)
"""Every floor above the decision: what an answered call hands on, the cluster it reads, what writes to it, and the
edges."""

# package prefix → rulesched packages it must not import
FORBIDDEN_LAYERS = {
    "rulesched.rules": ("rulesched.decide", *ABOVE_DECIDE),
    "rulesched.decide": ABOVE_DECIDE,
    # The cluster package reads; what writes stands on it, never the other way.
    "rulesched.cluster": (
        "rulesched.writes",
        "rulesched.controllers",
        "rulesched.extender",
        "rulesched.tools",
        "rulesched.cli",
    ),
    # The writers stand on the client, the rules and the settings only: what decides a write is above them.
    "rulesched.writes": (
        "rulesched.decide",
        "rulesched.controllers",
        "rulesched.extender",
        "rulesched.tools",
        "rulesched.cli",
    ),
    # A controller is composed by the server, never the other way (one controller never imports another:
    # `test_no_controller_imports_another`).
    "rulesched.controllers": ("rulesched.extender", "rulesched.tools", "rulesched.cli"),
    # The HTTP edge does not stand on the command-line wing: a Decision explains itself.
    "rulesched.extender": ("rulesched.tools", "rulesched.cli"),
    # The rule authors' tools stand beside the HTTP edge, not on it (a recording's format is shared below both).
    "rulesched.tools": ("rulesched.cli", "rulesched.extender"),
    # What the HTTP edge hands on once a call is answered (the answered call, the moments between requests) is a
    # floor below both the edge and the controllers that work from it (the shadow rules), on the decision only.
    "rulesched.handoff": tuple(floor for floor in ABOVE_DECIDE if floor != "rulesched.handoff"),
    "rulesched.recording_format": (
        "rulesched.rules",
        "rulesched.decide",
        "rulesched.cluster",
        "rulesched.writes",
        "rulesched.controllers",
        "rulesched.extender",
    ),
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
    "msgspec": ("rulesched.extender.wire", "rulesched.cluster.usage.pod_metrics_wire"),
    "watchfiles": ("rulesched.rules.reloader",),
    "pydantic_settings": ("rulesched.settings",),
    "httpx": ("rulesched.cluster.metrics.prometheus",),
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


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_shadow_controller_never_reaches_the_http_edge() -> None:
    """Not through another module either: the extender composes the controller (`server.py`, `state.py`,
    `app.py`, `metrics.py`), and the controller is handed what it needs (`handoff/`, its own metrics)."""
    edges = graph()
    shadow = [m for m in edges if m.startswith("rulesched.controllers.shadow")]
    assert shadow
    reached = {m: t for m in shadow for t in reachable(edges, m) if t.startswith("rulesched.extender")}
    assert reached == {}


def test_reachable_follows_imports_through_others() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert reachable(edges, "a") == {"a", "b", "c"}
    assert reachable(edges, "d") == {"a", "b", "c"}


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


def controller_of(module: str) -> str | None:
    """The controller package `module` belongs to (`rulesched.controllers.<name>`), None outside one."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["rulesched", "controllers"] else None


def other_controllers(module: str, found: set[str]) -> list[str]:
    """The imports among `found` of another controller than `module`'s own."""
    own = controller_of(module)
    return sorted(i for i in found if controller_of(i) not in (None, own))


def test_no_controller_imports_another() -> None:
    """Each controller is its own package: what two share is below them (cluster, writes, decide)."""
    found = {module: other_controllers(module, imports(path)) for module, path in MODULES if controller_of(module)}
    assert {module: others for module, others in found.items() if others} == {}


def test_the_controller_check_sees_a_controller_importing_another(tmp_path: Path) -> None:
    module = tmp_path / "controller.py"
    module.write_text("from rulesched.controllers.audit.auditor import Auditor\nimport rulesched.cluster.pods.index\n")
    found = imports(module)
    assert other_controllers("rulesched.controllers.requeue.controller", found) == [
        "rulesched.controllers.audit.auditor",
        "rulesched.controllers.audit.auditor.Auditor",
    ]
    assert other_controllers("rulesched.controllers.audit.descheduler", found) == []


def write_verbs() -> frozenset[str]:
    """Every write method of the kubernetes client's API classes (create_, patch_, replace_, delete_, and their
    `_with_http_info` forms), read from the pinned client itself: a new API group's writes are in it."""
    import kubernetes.client.api

    return frozenset(
        name
        for _, api in inspect.getmembers(kubernetes.client.api, inspect.isclass)
        for name, _ in inspect.getmembers(api, inspect.isfunction)
        if name.startswith(("create_", "patch_", "replace_", "delete_"))
    )


WRITE_MODELS = frozenset({"V1Eviction", "V1Binding"})
"""The client's models that are only ever sent to write (an eviction, a binding)."""
READ_METHODS = frozenset({"GET", "HEAD"})


def writes_in(path: Path, verbs: frozenset[str]) -> list[str]:
    """Where `path` writes to the API (`name:line`): an attribute or a string named as a write verb, a write-only
    model, a raw `call_api` with any method but GET or HEAD."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and (node.attr in verbs or node.attr in WRITE_MODELS):
            found.append(f"{node.attr}:{node.lineno}")
        elif isinstance(node, ast.Name) and node.id in WRITE_MODELS:
            found.append(f"{node.id}:{node.lineno}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in verbs:
            found.append(f"{node.value}:{node.lineno}")  # getattr(api, "patch_namespaced_pod")
        elif isinstance(node, ast.ImportFrom):
            found += [f"{a.name}:{node.lineno}" for a in node.names if a.name in WRITE_MODELS]
        elif isinstance(node, ast.Call) and _raw_write(node):
            found.append(f"call_api:{node.lineno}")
    return sorted(found, key=lambda where: int(where.rsplit(":", 1)[1]))


def _raw_write(call: ast.Call) -> bool:
    """A raw `call_api(path, method, ...)` whose method is not a constant GET or HEAD."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name != "call_api":
        return False
    methods = [k.value for k in call.keywords if k.arg == "method"] + call.args[1:2]
    return not methods or not (isinstance(methods[0], ast.Constant) and methods[0].value in READ_METHODS)


def test_only_the_writers_call_a_write_verb() -> None:
    """Every write to the cluster goes through `rulesched/writes/`: no other module names a write verb of the
    kubernetes client, builds an Eviction or a Binding, or writes through a raw `call_api`."""
    verbs = write_verbs()
    found = {m: writes_in(p, verbs) for m, p in MODULES if not m.startswith("rulesched.writes")}
    assert {module: where for module, where in found.items() if where} == {}


def test_the_writers_are_seen_writing() -> None:
    """The check finds the writes where they are (an empty verb list would pass everything)."""
    verbs = write_verbs()
    assert {"create_namespaced_pod_binding", "patch_namespaced_pod_with_http_info", "delete_node"} <= verbs
    assert "read_namespaced_pod" not in verbs
    writers = {m: writes_in(p, verbs) for m, p in MODULES if m.startswith("rulesched.writes.")}
    assert all(writers.values()), writers


def test_the_write_check_sees_every_kind_of_write(tmp_path: Path) -> None:
    module = tmp_path / "sneaky.py"
    module.write_text(
        "from kubernetes.client import CoreV1Api, V1Eviction\n"
        "def write(api, client, body):\n"
        "    CoreV1Api(api).patch_namespaced_pod('p', 'ns', body)\n"
        "    client.delete_namespaced_pod_with_http_info('p', 'ns')\n"
        "    getattr(CoreV1Api(api), 'replace_namespaced_lease')\n"
        "    V1Eviction(metadata=None)\n"
        "    kubernetes.client.V1Binding()\n"
        "    api.call_api('/api/v1/namespaces/ns/pods/p', 'DELETE')\n"
        "    api.call_api('/api/v1/nodes', method=method)\n"
        "    api.call_api('/api/v1/nodes', 'GET')\n"
        "    CoreV1Api(api).read_namespaced_pod('p', 'ns')\n"
    )
    assert writes_in(module, write_verbs()) == [
        "V1Eviction:1",
        "patch_namespaced_pod:3",
        "delete_namespaced_pod_with_http_info:4",
        "replace_namespaced_lease:5",
        "V1Eviction:6",
        "V1Binding:7",
        "call_api:8",
        "call_api:9",
    ]


FOLDER_MODULES = 20
"""No folder of the package holds more modules: a larger one is split by what its parts do."""


def folder_sizes(root: Path, base: Path = REPO) -> dict[str, int]:
    """Each folder under `root` (named relative to `base`) and how many modules it holds directly."""
    folders = [root, *(p for p in root.rglob("*") if p.is_dir() and p.name != "__pycache__")]
    return {folder.relative_to(base).as_posix(): len(list(folder.glob("*.py"))) for folder in folders}


def folders_over(sizes: dict[str, int]) -> dict[str, int]:
    """The folders over `FOLDER_MODULES` (none is allowed over it)."""
    return {f: n for f, n in sizes.items() if n > FOLDER_MODULES}


def test_no_folder_holds_more_modules_than_the_limit() -> None:
    assert folders_over(folder_sizes(PACKAGE)) == {}


def test_the_folder_check_sees_a_large_folder(tmp_path: Path) -> None:
    for folder, count in (("rulesched/small", FOLDER_MODULES), ("rulesched/small/big", FOLDER_MODULES + 1)):
        (tmp_path / folder).mkdir(parents=True)
        for index in range(count):
            (tmp_path / folder / f"m{index}.py").write_text('"""A module."""\n')
    assert folders_over(folder_sizes(tmp_path / "rulesched", tmp_path)) == {"rulesched/small/big": FOLDER_MODULES + 1}
    assert folders_over({"rulesched/extender": FOLDER_MODULES + 1}) != {}, "a real folder over the limit"


FOLDER_CHAIN = 5
"""No import chain inside one folder is longer (in modules, the folder's `__init__` included): a deeper folder is
cut by what its parts do, so that each room reads in a few steps."""
FOLDER_CHAINS_OVER = {"rulesched/rules": 9, "rulesched/decide/fast": 9, "rulesched/extender": 7}
"""Today's folders with a longer chain and its length, to be cut when next changed: none may grow, none may join."""


def folder_of(path: Path) -> str:
    """The folder of the package that holds the module at `path` (a package's `__init__` is in its own folder)."""
    return path.parent.relative_to(REPO).as_posix()


def chains(edges: dict[str, set[str]], folders: dict[str, str]) -> dict[str, int]:
    """Each folder of `folders` (module → folder) and the longest import chain of `edges` through its own modules
    only, counted in modules: an import of another folder's module ends the chain. `edges` has no circle."""

    @functools.cache
    def depth(module: str) -> int:
        inside = [target for target in edges.get(module, ()) if folders.get(target) == folders[module]]
        return 1 + max(map(depth, inside), default=0)

    longest: dict[str, int] = {}
    for module, folder in folders.items():
        longest[folder] = max(longest.get(folder, 0), depth(module))
    return longest


def chains_over(longest: dict[str, int]) -> dict[str, int]:
    """The folders whose longest chain is over `FOLDER_CHAIN`, past what `FOLDER_CHAINS_OVER` allows them."""
    return {f: n for f, n in longest.items() if n > max(FOLDER_CHAIN, FOLDER_CHAINS_OVER.get(f, 0))}


def test_no_import_chain_inside_a_folder_is_longer_than_the_limit() -> None:
    assert chains_over(chains(graph(), {module: folder_of(path) for module, path in MODULES})) == {}


def test_the_chain_check_sees_a_deep_folder() -> None:
    deep = [f"deep.m{index}" for index in range(FOLDER_CHAIN + 1)]
    flat = [f"flat.m{index}" for index in range(FOLDER_CHAIN)]
    edges = {module: {after} for chain in (deep, flat) for module, after in itertools.pairwise(chain)}
    edges[flat[-1]] = {deep[0]}  # an import of another folder's module does not lengthen this folder's chain
    folders = {module: "rulesched/" + module.split(".")[0] for module in deep + flat}
    assert chains(edges, folders) == {"rulesched/deep": FOLDER_CHAIN + 1, "rulesched/flat": FOLDER_CHAIN}
    assert chains_over(chains(edges, folders)) == {"rulesched/deep": FOLDER_CHAIN + 1}
    assert chains_over({"rulesched/extender": FOLDER_CHAINS_OVER["rulesched/extender"] + 1}) != {}, "an exception grew"


def test_the_named_exceptions_are_exactly_what_the_folders_reach() -> None:
    """An exception shrinks with its folder: a folder cut shorter must lower (or drop) its number here, so the slack
    is never left for a chain to grow back into unseen."""
    longest = chains(graph(), {module: folder_of(path) for module, path in MODULES})
    assert {folder: longest[folder] for folder in FOLDER_CHAINS_OVER} == FOLDER_CHAINS_OVER
