"""deploy/overlays/deschedule/: the write permissions descheduling needs, and nothing else (issue #26).

Rendered with the real kustomize and validated against the Kubernetes schemas like the other variants
(`tests/test_deploy.py`); the extender's identity gets exactly the calls `--deschedule on` makes, the Lease by
name, and the ValidatingAdmissionPolicy narrowing what RBAC cannot is evaluated (cel-python) on the requests
it must admit and refuse.
"""

from __future__ import annotations

import functools
import subprocess
from typing import Any

import celpy
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from celpy.adapter import json_to_cel

from rulesched.settings import Settings
from tests.admission import RbacAuthorizer, applies
from tests.test_deploy import (
    API_CALLS,
    DEPLOY,
    KUBERNETES_VERSION,
    LEASE_CALLS,
    NAMESPACE,
    SERVICE_ACCOUNT,
    Obj,
    container,
    flags,
    grants,
    kubectl,
    one,
    render,
)

OVERLAY = DEPLOY / "overlays" / "deschedule"
MARKER = ("rulesched.io", "writers", "use")
"""No API call: the permission admission.yaml recognises the extender by."""
DESCHEDULE_CALLS = {("", "pods/eviction", "create"), ("", "events", "create"), *LEASE_CALLS, MARKER}
EXTENDER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


@functools.cache
def _rendered() -> str:
    done = subprocess.run(
        [kubectl(), "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects() -> list[Obj]:
    return [obj for obj in yaml.safe_load_all(_rendered()) if obj]


def test_every_object_validates_against_the_kubernetes_schemas() -> None:
    for obj in objects():
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_extender_is_granted_exactly_what_evicting_takes() -> None:
    assert grants(objects(), SERVICE_ACCOUNT) == set(API_CALLS) | DESCHEDULE_CALLS


def test_the_base_stays_read_only() -> None:
    assert not [call for call in grants(render("default"), SERVICE_ACCOUNT) if call[2] not in {"get", "list", "watch"}]


def test_the_lease_is_read_and_renewed_by_name_in_the_extenders_namespace() -> None:
    settings = Settings()
    role = one(objects(), "Role", "rulesched-descheduler-lease")
    assert role["metadata"]["namespace"] == settings.lease_namespace == NAMESPACE
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [(r["resourceNames"], sorted(r["verbs"])) for r in named] == [([settings.lease_name], ["get", "update"])]


def test_the_extender_runs_with_deschedule_on() -> None:
    assert flags(container(objects(), "rulesched")["args"])["deschedule"] == "on"


def policy() -> Obj:
    return one(objects(), "ValidatingAdmissionPolicy", "rulesched-descheduler-writes")


def admitted(request: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Whether the policy admits `obj` in `request` (False when a validation is false)."""
    env = celpy.Environment()
    values = {"request": json_to_cel(request), "object": json_to_cel(obj)}
    user = request["userInfo"]["username"]
    if not applies(policy(), request, RbacAuthorizer(objects(), user)):
        return True  # not the extender: the policy does not apply
    return all(
        bool(env.program(env.compile(v["expression"])).evaluate(values)) for v in policy()["spec"]["validations"]
    )


def request(resource: str, namespace: str, sub: str = "", user: str = EXTENDER) -> dict[str, Any]:
    return {
        "resource": {"resource": resource},
        "subResource": sub,
        "namespace": namespace,
        "userInfo": {"username": user},
    }


LEASE = {"metadata": {"name": "rulesched-descheduler"}}
EVENT = {"involvedObject": {"kind": "Pod"}, "reason": "Descheduled"}
EVICTION = {"metadata": {"name": "web-1"}}


@pytest.mark.parametrize(
    ("req", "obj", "expected"),
    [
        (request("leases", NAMESPACE), LEASE, True),
        (request("leases", NAMESPACE), {"metadata": {"name": "kube-scheduler"}}, False),
        (request("events", "web"), EVENT, True),
        (request("events", "web"), {**EVENT, "reason": "Killing"}, False),
        (request("events", "web"), {**EVENT, "involvedObject": {"kind": "Node"}}, False),
        (request("pods", "web", "eviction"), EVICTION, True),
        (request("pods", "kube-system", "eviction"), EVICTION, False),
        (request("pods", "kube-system", "eviction", user="system:serviceaccount:x:y"), EVICTION, True),
    ],
)
def test_the_admission_policy_narrows_what_rbac_cannot(
    req: dict[str, Any], obj: dict[str, Any], expected: bool
) -> None:
    assert admitted(req, obj) == expected


def test_the_admission_policy_denies() -> None:
    binding = one(objects(), "ValidatingAdmissionPolicyBinding", "rulesched-descheduler-writes")
    assert (binding["spec"]["policyName"], binding["spec"]["validationActions"]) == (
        policy()["metadata"]["name"],
        ["Deny"],
    )


def test_leases_are_created_only_in_the_extenders_namespace() -> None:
    # The policy names the Lease; where it may be created is RBAC's to say: no ClusterRole grants leases,
    # the Role that does lives in the extender's namespace (and moves with it: tests/test_deploy_moved.py).
    rendered = objects()
    cluster_wide = RbacAuthorizer(rendered, EXTENDER).rules()
    assert not [rule for rule in cluster_wide if "leases" in rule["resources"]]
    role = one(rendered, "Role", "rulesched-descheduler-lease")
    assert role["metadata"]["namespace"] == one(rendered, "ServiceAccount", SERVICE_ACCOUNT)["metadata"]["namespace"]
