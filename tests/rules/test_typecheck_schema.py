"""The Kubernetes schema rules are type-checked against (`rules/cel/kubernetes_types.json`): written from the
pinned `kubernetes` client's models, and typed as the rules read the JSON (issue #40, point 1)."""

from __future__ import annotations

import pytest

from rulesched.cluster.kube import kubernetes_types
from rulesched.rules.cel.types import kubernetes_table, kubernetes_version, parse, value_type
from rulesched.rules.vocabulary import NAMES, context_types, type_table
from tests.paths import REPO

TABLE = REPO / "rulesched" / "rules" / "cel" / "kubernetes_types.json"


def test_the_table_is_what_the_installed_client_writes() -> None:
    """After a change of the pinned client: `python -m rulesched.cluster.kube.kubernetes_types > <the table>`."""
    assert TABLE.read_text() == kubernetes_types.text()


def test_the_schema_is_at_least_the_newest_kubernetes_the_project_covers() -> None:
    major, minor = map(int, kubernetes_version().split("."))
    assert (major, minor) >= (1, 36)
    assert kubernetes_table()["roots"] == {"Pod": "V1Pod", "Node": "V1Node", "Namespace": "V1Namespace"}


@pytest.mark.parametrize(
    ("model", "field", "expected"),
    [
        ("V1ObjectMeta", "labels", "map(string, string)"),
        ("V1ObjectMeta", "annotations", "map(string, string)"),
        ("V1ObjectMeta", "creationTimestamp", "string"),
        ("V1PodSpec", "nodeSelector", "map(string, string)"),
        ("V1PodSpec", "containers", "list(Container)"),
        ("V1PodSpec", "tolerations", "list(Toleration)"),
        ("V1NodeSpec", "taints", "list(Taint)"),
        ("V1NodeStatus", "allocatable", "map(string, string)"),
        ("V1NodeStatus", "capacity", "map(string, string)"),
        ("V1ResourceRequirements", "requests", "map(string, string)"),
        ("V1ResourceRequirements", "limits", "map(string, string)"),
        ("V1ContainerPort", "containerPort", "int"),
        ("V1HTTPGetAction", "port", "dyn"),
    ],
)
def test_fields_are_typed_as_the_rules_read_the_json(model: str, field: str, expected: str) -> None:
    assert str(parse(kubernetes_table()["types"][model][field])) == expected


def test_every_context_name_has_a_type() -> None:
    types = context_types()
    assert {str(types[name]) for name in ("pod", "node", "namespaceObject")} == {"Pod", "Node", "NamespaceView"}
    assert [entry.name for entry in NAMES if entry.typed == "dyn"] == ["variables"]
    assert str(types["pods"]) == "list(PodView)"
    assert str(types["allocatable"]) == "map(string, double)"


@pytest.mark.parametrize(
    ("value", "name"), [("a", "string"), (1, "int"), (1.5, "double"), (True, "bool"), ([], "list"), ({}, "map")]
)
def test_a_result_is_named_by_its_cel_type(value: object, name: str) -> None:
    assert value_type(value) == name


def test_the_docs_list_every_names_type() -> None:
    assert type_table() in (REPO / "docs" / "rules" / "cluster-context.md").read_text()
