"""Who a ValidatingAdmissionPolicy applies to, decided as the API server decides it: its matchConditions
evaluated (cel-python) with `request` and an `authorizer` that answers from the rendered RBAC.

The policies in deploy/ recognise the extender by a marker permission its ClusterRole grants, not by a
user name; `RbacAuthorizer` reads the rendered ClusterRoles and ClusterRoleBindings (the marker is
cluster-scoped, so namespaced RoleBindings never grant it) with RBAC's rules: `*` matches any group,
resource or verb, and `resourceNames` narrows a rule to those names. `system:masters` is allowed
everything, as the API server's authorizer chain allows it before RBAC is asked.

`moved(overlay)` renders an overlay the way a user moves it: a kustomization of their own naming it as a
resource, with a `namespace:` override and the extender's ServiceAccount renamed.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import celpy
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel

from tests.test_deploy import kubectl

Obj = dict[str, Any]

MOVED_NAMESPACE = "team-sched"
MOVED_ACCOUNT = "team-extender"


def username(namespace: str, account: str) -> str:
    return f"system:serviceaccount:{namespace}:{account}"


@dataclass(frozen=True)
class Attributes:
    """What `authorizer.group(...).resource(...).name(...)` has said so far, then the verb `check` asks."""

    rbac: RbacAuthorizer
    group: str = ""
    resource: str = ""
    name: str = ""
    verb: str = ""


def _rule_allows(rule: Mapping[str, Any], asked: Attributes) -> bool:
    def among(values: Iterable[str], value: str) -> bool:
        return "*" in values or value in values

    names = rule.get("resourceNames") or []
    return (
        among(rule.get("apiGroups", []), asked.group)
        and among(rule.get("resources", []), asked.resource)
        and among(rule["verbs"], asked.verb)
        and (not names or asked.name in names)
    )


@dataclass(frozen=True)
class RbacAuthorizer:
    """The cluster-wide RBAC rules the rendered objects give `user` (with `groups`)."""

    objects: Sequence[Obj]
    user: str
    groups: tuple[str, ...] = ()

    def _subject(self, subject: Mapping[str, Any]) -> bool:
        if subject["kind"] == "ServiceAccount":
            return username(subject["namespace"], subject["name"]) == self.user
        if subject["kind"] == "User":
            return bool(subject["name"] == self.user)
        return subject["name"] in self.groups

    def rules(self) -> list[Mapping[str, Any]]:
        roles = {
            b["roleRef"]["name"]
            for b in self.objects
            if b["kind"] == "ClusterRoleBinding" and any(self._subject(s) for s in b.get("subjects", []))
        }
        return [
            rule
            for role in self.objects
            if role["kind"] == "ClusterRole" and role["metadata"]["name"] in roles
            for rule in role.get("rules", [])
        ]

    def allowed(self, asked: Attributes) -> bool:
        return "system:masters" in self.groups or any(_rule_allows(rule, asked) for rule in self.rules())


def _step(field: str) -> Any:
    def step(attributes: Attributes, value: Any) -> Attributes:
        return Attributes(**{**attributes.__dict__, field: str(value)})

    return step


_FUNCTIONS = {
    "group": _step("group"),
    "resource": _step("resource"),
    "name": _step("name"),
    "check": _step("verb"),
    "allowed": lambda attributes: celtypes.BoolType(attributes.rbac.allowed(attributes)),
}


def applies(policy: Obj, request: Obj, rbac: RbacAuthorizer) -> bool:
    """Whether every matchCondition of `policy` holds for `request` (as its user, with the rendered RBAC)."""
    env = celpy.Environment()
    values: dict[str, Any] = {
        "request": json_to_cel(request),
        "object": json_to_cel(request.get("object")),
        "oldObject": json_to_cel(request.get("oldObject")),
        "authorizer": Attributes(rbac),
    }
    conditions = [c["expression"] for c in policy["spec"]["matchConditions"]]
    return all(bool(env.program(env.compile(c), functions=_FUNCTIONS).evaluate(values)) for c in conditions)


def kustomize_build(directory: Path) -> list[Obj]:
    done = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


@functools.cache
def _moved(overlay: Path) -> str:
    with tempfile.TemporaryDirectory() as mine:
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            # kustomize takes a directory of kustomizations by relative path only.
            "resources": [os.path.relpath(overlay, mine)],
            "namespace": MOVED_NAMESPACE,
            "patches": [
                {
                    "target": {"kind": "ServiceAccount", "name": "rulesched"},
                    "patch": yaml.safe_dump([{"op": "replace", "path": "/metadata/name", "value": MOVED_ACCOUNT}]),
                }
            ],
        }
        (Path(mine) / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        return yaml.safe_dump_all(kustomize_build(Path(mine)))


def moved(overlay: Path) -> list[Obj]:
    """`overlay` rendered under a `namespace:` override, its extender ServiceAccount renamed (a fresh copy)."""
    return [obj for obj in yaml.safe_load_all(_moved(overlay)) if obj]


def moved_text(overlay: Path) -> str:
    return _moved(overlay)
