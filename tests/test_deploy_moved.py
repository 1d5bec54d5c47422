"""Every variant of deploy/ moved the way a user moves it: their own kustomization naming the overlay, with a
`namespace:` override and the extender's ServiceAccount renamed (`tests/admission.py`).

Nothing may stay behind in rulesched-system: not an object, not a string inside the kube-scheduler
configuration (its extender URL, its leader-election namespace), not a flag, not an admission policy's
idea of who the extender is. Each policy is evaluated (its matchConditions, with an authorizer answering
from the rendered RBAC) as the moved ServiceAccount, which it must apply to, and as the account left
behind, which no longer exists.
"""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.settings import Settings
from tests.admission import (
    MOVED_ACCOUNT,
    MOVED_NAMESPACE,
    Obj,
    RbacAuthorizer,
    applies,
    moved,
    moved_text,
    username,
)
from tests.test_deploy import DEPLOY, NAMESPACE, SERVICE_ACCOUNT, container, flags, one, pod_spec, scheduler_config

OVERLAYS = {
    "default": DEPLOY,
    "bind": DEPLOY / "overlays" / "bind",
    "main-scheduler": DEPLOY / "overlays" / "main-scheduler",
    "requeue": DEPLOY / "overlays" / "requeue",
    "deschedule": DEPLOY / "overlays" / "deschedule",
    "monitoring": DEPLOY / "overlays" / "monitoring",
}
WITH_SCHEDULER = ("default", "bind", "requeue", "deschedule", "monitoring")
POLICIES = {"requeue": "rulesched-requeue", "deschedule": "rulesched-descheduler-writes"}
MOVED_USER = username(MOVED_NAMESPACE, MOVED_ACCOUNT)


@pytest.mark.parametrize("variant", OVERLAYS)
def test_the_old_namespace_appears_nowhere(variant: str) -> None:
    assert (OVERLAYS[variant] / "kustomization.yaml").is_file()
    text = moved_text(OVERLAYS[variant])
    assert NAMESPACE not in text
    assert MOVED_NAMESPACE in text


@pytest.mark.parametrize("variant", OVERLAYS)
def test_every_namespaced_object_moves(variant: str) -> None:
    elsewhere = {
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
        for o in moved(OVERLAYS[variant])
        if o["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding"}
        and not o["kind"].startswith("ValidatingAdmissionPolicy")
        and o["metadata"].get("namespace") != MOVED_NAMESPACE
    }
    assert elsewhere <= {("RoleBinding", "rulesched-extension-apiserver-authentication-reader", "kube-system")}


@pytest.mark.parametrize("variant", OVERLAYS)
def test_the_extender_runs_as_the_renamed_account_and_every_binding_names_it(variant: str) -> None:
    objects = moved(OVERLAYS[variant])
    assert pod_spec(objects)["serviceAccountName"] == MOVED_ACCOUNT
    subjects = [s for b in objects if b["kind"].endswith("RoleBinding") for s in b["subjects"]]
    assert {"kind": "ServiceAccount", "name": MOVED_ACCOUNT, "namespace": MOVED_NAMESPACE} in subjects
    assert not [s for s in subjects if s["name"] == SERVICE_ACCOUNT]


def _from_the_pod(env: list[Obj], name: str) -> bool:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in env


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_kube_scheduler_calls_the_service_in_its_own_namespace(variant: str) -> None:
    objects = moved(OVERLAYS[variant])
    [extender] = scheduler_config(objects)["extenders"]
    service = one(objects, "Service", "rulesched")
    [port] = service["spec"]["ports"]
    # A name without a dot resolves through the pod's DNS search path: its own namespace first.
    assert extender["urlPrefix"] == f"http://{service['metadata']['name']}:{port['port']}"
    scheduler = one(objects, "Deployment", "rulesched-scheduler")
    assert service["metadata"]["namespace"] == scheduler["metadata"]["namespace"] == MOVED_NAMESPACE


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_kube_scheduler_elects_its_leader_where_its_role_is(variant: str) -> None:
    objects = moved(OVERLAYS[variant])
    assert "resourceNamespace" not in scheduler_config(objects)["leaderElection"]
    scheduler = container(objects, "kube-scheduler")
    assert flags(scheduler["command"])["leader-elect-resource-namespace"] == "$(POD_NAMESPACE)"
    assert _from_the_pod(scheduler["env"], "POD_NAMESPACE")
    assert one(objects, "Role", "rulesched-leader-election")["metadata"]["namespace"] == MOVED_NAMESPACE


def test_the_descheduler_lease_follows_the_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = moved(OVERLAYS["deschedule"])
    [env] = [e for e in container(objects, "rulesched")["env"] if e["name"].endswith("LEASE_NAMESPACE")]
    assert _from_the_pod([env], env["name"])
    monkeypatch.setenv(env["name"], MOVED_NAMESPACE)
    assert Settings().lease_namespace == MOVED_NAMESPACE  # the name the settings read
    assert one(objects, "Role", "rulesched-descheduler-lease")["metadata"]["namespace"] == MOVED_NAMESPACE


def test_the_tls_overlay_accepts_its_own_certificate_in_any_namespace() -> None:
    rulesched = container(moved(OVERLAYS["main-scheduler"]), "rulesched")
    names = [arg.partition("=")[2] for arg in rulesched["args"] if arg.startswith("--tls-client-name=")]
    assert names == ["kube-scheduler", "rulesched.$(POD_NAMESPACE).svc"]
    assert _from_the_pod(rulesched["env"], "POD_NAMESPACE")


def test_prometheus_looks_in_the_extenders_namespace() -> None:
    monitor = one(moved(OVERLAYS["monitoring"]), "ServiceMonitor", "rulesched")
    assert monitor["metadata"]["namespace"] == MOVED_NAMESPACE
    assert "namespaceSelector" not in monitor["spec"]  # its own namespace


def _request(user: str) -> dict[str, Any]:
    return {"userInfo": {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]}}


@pytest.mark.parametrize("variant", POLICIES)
def test_each_policy_applies_to_the_moved_account_only(variant: str) -> None:
    objects = moved(OVERLAYS[variant])
    policy = one(objects, "ValidatingAdmissionPolicy", POLICIES[variant])

    def applies_to(user: str, *groups: str) -> bool:
        return applies(policy, _request(user), RbacAuthorizer(objects, user, groups))

    assert applies_to(MOVED_USER)
    assert not applies_to(username(NAMESPACE, SERVICE_ACCOUNT))  # left behind: no longer the extender
    assert not applies_to(username(MOVED_NAMESPACE, "rulesched-scheduler"))
    assert not applies_to("kubernetes-admin", "system:masters")  # allowed everything: not the extender


@pytest.mark.parametrize("variant", POLICIES)
def test_a_cluster_admin_is_not_taken_for_the_extender(variant: str) -> None:
    objects = moved(OVERLAYS[variant])
    admin: Obj = {"kind": "ClusterRole", "metadata": {"name": "cluster-admin"}}
    admin["rules"] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    binding: Obj = {"kind": "ClusterRoleBinding", "metadata": {"name": "argo"}, "roleRef": {"name": "cluster-admin"}}
    binding["subjects"] = [{"kind": "ServiceAccount", "name": "argocd", "namespace": "argo"}]
    user = username("argo", "argocd")
    policy = one(objects, "ValidatingAdmissionPolicy", POLICIES[variant])
    assert not applies(policy, _request(user), RbacAuthorizer([*objects, admin, binding], user))
