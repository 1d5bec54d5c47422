"""No cache keyed by `id()` where the object can go before its entry: an object's id is reused once it is freed,
so a key made of it is only as good as the object's lifetime.

Every use of the builtin `id` in the package is listed here with why the object outlives what is keyed by its
id; a new one fails until it is argued for here. The node contexts (`rules/context.py`) key a node by its
resourceVersion or its content, never by its id.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

PACKAGE = REPO / "rulesched"

ARGUED = {
    "rulesched/decide/fast/collect.py": "counts the verdicts of one call, all held by the call's list",
    "rulesched/decide/fast/engine.py": "groups one call's outcomes, all held by the call's columns",
    "rulesched/decide/fast/filters.py": "groups one rule's failed bindings, all held by its results",
    "rulesched/decide/fast/prepared.py": "each entry holds its book weakly and is used only while `ref() is book`",
    "rulesched/decide/fast/tables.py": "each entry holds its verdict (`FailedVerdict.verdict`)",
    "rulesched/extender/metrics.py": "the metrics are attributes of the `Metrics` object whose dict the keys are in",
    "rulesched/extender/recording.py": "each entry holds its object and is used only while `held is obj`",
    "rulesched/rules/cel/analysis.py": "the parents of one parsed expression, held by its tree",
    "rulesched/rules/cel/celpy_optional.py": "a hash beside an equality by identity, not a key kept",
    "rulesched/rules/yaml_checks.py": "the containers visited in one walk, held by the document walked",
}
"""The modules that use `id`, and why the object outlives every key made of its id."""


def uses_of_id(source: str) -> int:
    """How many times `source` reads the builtin `id` (`id(x)`, `map(id, xs)`): a name `id` it does not bind."""
    tree = ast.parse(source)
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    if "id" in bound:
        return 0
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "id" and isinstance(n.ctx, ast.Load))


def modules_using_id(package: Path) -> set[str]:
    return {
        path.relative_to(package.parent).as_posix()
        for path in sorted(package.rglob("*.py"))
        if uses_of_id(path.read_text(encoding="utf-8"))
    }


def test_every_use_of_id_in_the_package_is_argued_for_and_no_node_context_is_keyed_by_it() -> None:
    found = modules_using_id(PACKAGE)
    assert found - set(ARGUED) == set(), "a new use of id(): key by the object itself or its content instead"
    assert set(ARGUED) - found == set(), "no longer uses id(): take it off the list"
    assert "rulesched/rules/context.py" not in found


def test_the_check_sees_an_id_used_as_a_key(tmp_path: Path) -> None:
    package = tmp_path / "rulesched"
    (package / "rules").mkdir(parents=True)
    (package / "rules" / "context.py").write_text("def key(node):\n    return (node['name'], id(node))\n")
    (package / "rules" / "other.py").write_text("def ids(nodes):\n    return list(map(id, nodes))\n")
    (package / "rules" / "named.py").write_text("def record(id):\n    return {'id': id}\n")
    assert modules_using_id(package) == {"rulesched/rules/context.py", "rulesched/rules/other.py"}
