"""deploy/overlays/requeue/: rendered and schema-checked like the other variants, granting the extender
`patch` on pods and nothing more, and its ValidatingAdmissionPolicy evaluated with rulesched's own CEL
engines (both) against admission requests: the extender's nudge is admitted; a label, another annotation,
a spec change, a finalizer, a node change by the extender's identity are refused; other users are not
looked at.

The policy's CEL reads `object`, `oldObject`, `request` and its own `variables`; rulesched's engines declare
a fixed set of names, so each expression is evaluated with those three read from `variables` (the
expression text is otherwise unchanged) and the policy's variables evaluated first, in order, as the API
server does.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import subprocess
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from rulesched.rules.cel import ENGINE_NAMES, Engine, make_engine
from rulesched.writes.nudge import ANNOTATION, FIELD_MANAGER, Nudge, change_id, patch_body
from tests.admission import RbacAuthorizer, applies
from tests.paths import APISERVER_FIXTURES, POD_FIXTURES, REPO
from tests.test_deploy import API_CALLS, KUBERNETES_VERSION, NAMESPACE, SERVICE_ACCOUNT, grants, kubectl, one

OVERLAY = REPO / "deploy" / "overlays" / "requeue"
EXTENDER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
Obj = dict[str, Any]


@functools.cache
def _rendered() -> str:
    done = subprocess.run([kubectl(), "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def rendered() -> list[Obj]:
    return [obj for obj in yaml.safe_load_all(_rendered()) if obj]


def test_the_overlay_validates_against_the_kubernetes_schemas() -> None:
    errors = []
    for obj in rendered():
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {error.message}")
    assert errors == []


def test_the_overlay_grants_patch_on_pods_only_and_runs_with_requeue() -> None:
    objects = rendered()
    marker = ("rulesched.io", "writers", "use")  # no API call: what the policy recognises the extender by
    assert grants(objects, SERVICE_ACCOUNT) == set(API_CALLS) | {("", "pods", "patch"), marker}
    args = one(objects, "Deployment", "rulesched")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--requeue" in args
    binding = one(objects, "ValidatingAdmissionPolicyBinding", "rulesched-requeue")
    assert binding["spec"] == {"policyName": "rulesched-requeue", "validationActions": ["Deny"]}


# --- the policy, evaluated -------------------------------------------------------------------------


def policy() -> Obj:
    return one(rendered(), "ValidatingAdmissionPolicy", "rulesched-requeue")


_NAMES = re.compile(r"(?<![\w.])(object|oldObject|request)\b")


def _compiled(engine: Engine, expression: str) -> Any:
    return engine.compile(_NAMES.sub(r"variables.\1", expression))


def admit(engine: Engine, request: Obj) -> list[str] | None:
    """The messages of the validations `request` fails (empty: admitted); None when the policy does not apply."""
    spec = policy()["spec"]
    values: Obj = {"object": request["object"], "oldObject": request["oldObject"], "request": request}

    def value(expression: str) -> Any:
        program = _compiled(engine, expression)
        return program.evaluate(engine.bindings({"variables": engine.convert(values)}))

    # The matchConditions ask the authorizer, which rulesched's engines do not have: cel-python, with the
    # rendered RBAC answering (tests/admission.py).
    if not applies(policy(), request, RbacAuthorizer(rendered(), request["userInfo"]["username"])):
        return None
    for variable in spec["variables"]:
        values[variable["name"]] = value(variable["expression"])
    return [v["message"] for v in spec["validations"] if value(v["expression"]) is not True]


def pending_pod() -> Obj:
    pod: Obj = json.loads((POD_FIXTURES / "w2-pods-watch-assigned.ndjson").read_text().splitlines()[0])["object"]
    pod["spec"].pop("nodeName", None)
    pod["metadata"].setdefault("annotations", {})["team.xy.com/owner"] = "alpha"
    return pod


def node() -> Obj:
    listed = json.loads((APISERVER_FIXTURES / "a1-nodes-list.json").read_text())
    found: Obj = listed["items"][0]
    return found


def update(old: Obj, new: Obj, resource: str = "pods", user: str = EXTENDER) -> Obj:
    """An AdmissionRequest of an UPDATE (a patch), as the API server hands it to the policy."""
    return {
        "kind": {"group": "", "version": "v1", "kind": "Pod" if resource == "pods" else "Node"},
        "resource": {"group": "", "version": "v1", "resource": resource},
        "name": old["metadata"]["name"],
        "namespace": old["metadata"].get("namespace", ""),
        "operation": "UPDATE",
        "userInfo": {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]},
        "object": new,
        "oldObject": old,
    }


def changed(change: Any) -> Obj:
    """A pending pod changed by `change(pod)` (which changes it in place)."""
    pod = pending_pod()
    change(pod)
    return pod


def rulesched_entry(time: str = "2026-11-23T01:10:00Z", owned: Obj | None = None) -> Obj:
    """The managedFields entry the API server records for the nudge (manager: the patch's fieldManager)."""
    owned = owned if owned is not None else {"f:metadata": {"f:annotations": {"f:" + ANNOTATION: {}}}}
    entry = {"manager": FIELD_MANAGER, "operation": "Update", "apiVersion": "v1", "time": time}
    return entry | {"fieldsType": "FieldsV1", "fieldsV1": owned}


def nudged(pod: Obj, time: str = "2026-11-23T01:10:00Z") -> Obj:
    """`pod` with the nudge's JSON merge patch applied (the annotation; the uid precondition holds), and the
    API server's record of it in managedFields."""
    body = patch_body(Nudge("k", "ns", "name", pod["metadata"]["uid"], change_id("metrics", ["x"]), "metrics", 0, "n"))
    new = copy.deepcopy(pod)
    assert body["metadata"]["uid"] == new["metadata"]["uid"]
    new["metadata"]["annotations"].update(body["metadata"]["annotations"])
    others = [e for e in new["metadata"].get("managedFields", []) if e["manager"] != FIELD_MANAGER]
    new["metadata"]["managedFields"] = [*others, rulesched_entry(time)]
    return new


@pytest.fixture(params=ENGINE_NAMES)
def engine(request: pytest.FixtureRequest) -> Engine:
    return make_engine(request.param)


def test_the_nudge_is_admitted(engine: Engine) -> None:
    old = pending_pod()
    assert admit(engine, update(old, nudged(old))) == []
    again = nudged(old)
    again["metadata"]["annotations"][ANNOTATION] = change_id("rules", ["y"])
    assert admit(engine, update(nudged(old), again)) == []  # a later change's value
    assert admit(engine, update(nudged(old), old)) == []  # and its removal
    created = nudged(old)
    created["metadata"]["managedFields"][-1]["fieldsV1"]["f:metadata"]["f:annotations"]["."] = {}
    assert admit(engine, update(old, created)) == []  # the annotations made by the nudge


def _managed(change: Any) -> Any:
    """A change of the pod's managedFields."""

    def apply(pod: Obj) -> None:
        change(pod["metadata"].setdefault("managedFields", []))

    return apply


def _claim(fields: Obj) -> Any:
    """rulesched's own managedFields entry claims `fields` besides the annotation."""

    def apply(entries: list[Obj]) -> None:
        entries.append(rulesched_entry(owned={"f:metadata": {"f:annotations": {"f:" + ANNOTATION: {}}}} | fields))

    return apply


def _set(path: str, value: Any) -> Any:
    def change(pod: Obj) -> None:
        *parents, last = path.split(".")
        target = pod
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value

    return change


def _annotate(key: str, value: str) -> Any:
    def change(pod: Obj) -> None:
        pod["metadata"]["annotations"][key] = value

    return change


REFUSED = {
    "a new label": (_set("metadata.labels.app", "other"), "no pod label"),
    "another annotation": (_annotate("team.xy.com/owner", "beta"), "no pod annotation"),
    "an annotation added": (_set("metadata.annotations.extra", "1"), "no pod annotation"),
    "an annotation removed": (lambda pod: pod["metadata"]["annotations"].pop("team.xy.com/owner"), "no pod annotation"),
    "a toleration": (lambda pod: pod["spec"].setdefault("tolerations", []).append({"operator": "Exists"}), "pod spec"),
    "an image": (lambda pod: pod["spec"]["containers"][0].update(image="evil:latest"), "pod spec"),
    "a node name": (_set("spec.nodeName", "node-a"), "pod spec"),
    "a finalizer": (_set("metadata.finalizers", ["example.com/hold"]), "finalizer"),
    "the value's form": (_annotate(ANNOTATION, "anything at all"), "change id"),
    "a generateName": (_set("metadata.generateName", "w-run-"), "generateName"),
    "another manager's entry": (_managed(lambda entries: entries[0].update(manager="me")), "managedFields"),
    "another manager's fields": (_managed(lambda entries: entries[0].update(fieldsV1={})), "managedFields"),
    "an entry dropped": (_managed(lambda entries: entries.clear()), "managedFields"),
    "a spec field claimed": (_managed(_claim({"f:spec": {"f:nodeName": {}}})), "annotation only"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_any_other_change_of_a_pod_is_refused(engine: Engine, case: str) -> None:
    change, reason = REFUSED[case]
    old = pending_pod()
    refused = admit(engine, update(old, changed(change)))
    assert refused, case
    assert any(reason in message for message in refused), refused
    if case != "the value's form":
        with_nudge = changed(change)
        with_nudge["metadata"]["annotations"][ANNOTATION] = change_id("nodes", ["z"])
        assert admit(engine, update(old, with_nudge)), f"{case} hidden behind a nudge"


def test_labelling_a_node_is_refused(engine: Engine) -> None:
    old = node()
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["pool"] = "open"
    assert admit(engine, update(old, new, "nodes")) == ["rulesched's extender changes no node"]


def test_other_users_are_not_looked_at(engine: Engine) -> None:
    old = pending_pod()
    relabelled = changed(_set("metadata.labels.app", "other"))
    controller = "system:serviceaccount:kube-system:replicaset-controller"
    assert admit(engine, update(old, relabelled, user=controller)) is None
    assert admit(engine, update(old, relabelled, user=f"{EXTENDER}-other")) is None
