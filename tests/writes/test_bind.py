"""Binding pods through a loopback API server: success, and every refusal returned as the API's reason."""

from __future__ import annotations

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.writes.bind import ApiBinder
from tests.kubeapi import KubeAPI


@pytest.fixture
def api(api: KubeAPI) -> KubeAPI:
    """The shared API server, holding the pod these tests bind."""
    api.add_pod("default", "web-1", "uid-web-1")
    return api


@pytest.fixture
def binder(access: KubeAccess) -> ApiBinder:
    return ApiBinder(access.api, timeout=2.0)


def test_bind_creates_the_binding_with_the_pod_uid_and_target_node(api: KubeAPI, binder: ApiBinder) -> None:
    assert binder.bind("default", "web-1", "uid-web-1", "node-b") == ""
    assert api.pod("default", "web-1").node == "node-b"
    [sent] = api.bindings()
    assert sent["metadata"] == {"name": "web-1", "namespace": "default", "uid": "uid-web-1"}
    assert sent["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-b"}


def test_bind_of_an_already_bound_pod_returns_the_conflict(api: KubeAPI, binder: ApiBinder) -> None:
    api.add_pod("default", "web-2", "uid-web-2", node="node-a")
    reason = binder.bind("default", "web-2", "uid-web-2", "node-b")
    assert (
        reason
        == 'Operation cannot be fulfilled on pods/binding "web-2": pod web-2 is already assigned to node "node-a"'
    )
    assert api.pod("default", "web-2").node == "node-a"


def test_bind_of_a_recreated_pod_fails_its_uid_precondition(api: KubeAPI, binder: ApiBinder) -> None:
    reason = binder.bind("default", "web-1", "uid-of-the-old-web-1", "node-b")
    assert reason == "Precondition failed: UID in precondition: uid-of-the-old-web-1, UID in object meta: uid-web-1"
    assert api.pod("default", "web-1").node == ""


def test_bind_without_permission_returns_the_forbidden_reason(api: KubeAPI, binder: ApiBinder) -> None:
    api.forbid_binding()
    reason = binder.bind("default", "web-1", "uid-web-1", "node-b")
    assert reason.startswith('pods "web-1" is forbidden: User "system:serviceaccount:kube-system:rulesched"')


def test_bind_of_a_missing_pod_returns_not_found(binder: ApiBinder) -> None:
    assert binder.bind("default", "gone", "uid-gone", "node-b") == 'pods "gone" not found'


def test_bind_with_the_api_down_returns_a_reason_instead_of_raising(api: KubeAPI, binder: ApiBinder) -> None:
    api.go_down()
    reason = binder.bind("default", "web-1", "uid-web-1", "node-b")
    assert reason.startswith("binding default/web-1 to node-b failed: ProtocolError")
