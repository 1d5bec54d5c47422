"""A throwaway Kubernetes control plane on loopback for `bench/real_scheduler.py`: etcd, kube-apiserver, and Node
objects with no kubelets behind them.

The binaries are the caller's (`Binaries.found` refuses, naming what is missing, before anything starts).
Everything lives in the caller's temporary directory: etcd's data, the certificates (made with trustme), the
static token, the kubeconfig, every process's log. Every port is a free loopback port; every process runs in a
session of its own and is stopped, its whole session, when the `Processes` closes; every wait is bounded, and a
component that exits or does not become ready in time raises `ComponentError` with the tail of its log.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import trustme
import yaml

from bench.harness import free_port, tail

JSON = dict[str, Any]
TOKEN = "rulesched-bench-admin-token"
"""The static bearer token of the one user (group `system:masters`) that every client uses."""
START_SECONDS = 120.0
"""How long a component may take to become ready."""
STOP_SECONDS = 10.0
"""How long a stopped component may take to exit before it is killed."""
UNLABELLED_SHARE = 10
"""One node in this many (the last ones) lacks `filter.xy.com`: the live rules reject it."""
DRAIN_LABEL = "drain.xy.com"
"""On one node in `UNLABELLED_SHARE` (the first ones): the shadow-only filter keeps probe pods off them."""
HOW_TO_GET = (
    "kube-apiserver, kube-scheduler and kube-controller-manager are in any Kubernetes release's server binaries "
    "(kubernetes-server-linux-<arch>.tar.gz, kubernetes/server/bin/) or built from source "
    "(`make WHAT='cmd/kube-apiserver cmd/kube-scheduler cmd/kube-controller-manager'`);"
    " etcd from its release or a distribution package (Debian: etcd-server), or give its path with --etcd"
)


class MissingBinariesError(Exception):
    """A binary the benchmark needs is not there: nothing was started."""


class ComponentError(Exception):
    """A component exited, or did not become ready in time; the message ends with the tail of its log."""


@dataclass(frozen=True)
class Binaries:
    """The programs of the control plane and the scheduler, as given on the command line."""

    apiserver: Path
    scheduler: Path
    etcd: Path
    controller_manager: Path | None = None
    """Only for the scripts that run controllers (`found(..., controllers=True)`)."""

    @classmethod
    def found(cls, kube_bin: Path, etcd: str, controllers: bool = False) -> Binaries:
        """The binaries in `kube_bin` (with `controllers`, kube-controller-manager too) and `etcd` (a path, or a
        name looked up on PATH); raises `MissingBinariesError` naming every one that is not an executable file,
        and how to get them."""
        names = ("kube-apiserver", "kube-scheduler", *(("kube-controller-manager",) if controllers else ()))
        wanted = {name: kube_bin / name for name in names}
        etcd_path = shutil.which(etcd)
        missing = [f"{name} (looked for {path})" for name, path in wanted.items() if not os.access(path, os.X_OK)]
        if etcd_path is None:
            missing.append(f"etcd (looked for {etcd!r}{' on PATH' if os.sep not in etcd else ''})")
        if missing:
            raise MissingBinariesError(f"missing: {'; '.join(missing)}.\n{HOW_TO_GET}")
        manager = wanted.get("kube-controller-manager")
        return cls(wanted["kube-apiserver"], wanted["kube-scheduler"], Path(etcd_path or etcd), manager)


def version_of(program: Path) -> str:
    """The first line a program prints for `--version` (`Kubernetes v1.20.2`, `etcd Version: 3.4.23`)."""
    found = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=30, check=False)
    lines = (found.stdout or found.stderr).strip().splitlines()
    return lines[0] if lines else "?"


def minor_of(version: str) -> tuple[int, int]:
    """(major, minor) of a Kubernetes version line such as `Kubernetes v1.20.2`."""
    found = re.search(r"v(\d+)\.(\d+)", version)
    if not found:
        raise ValueError(f"not a Kubernetes version: {version!r}")
    return int(found[1]), int(found[2])


@dataclass(frozen=True)
class Launched:
    """A component running in a session of its own, and where its output goes."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def failed(self, why: str) -> ComponentError:
        return ComponentError(f"{self.name} {why}{tail(self.log)}")


class Processes:
    """The components of one invocation; on close each still running is stopped, the last started first."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.running: list[Launched] = []

    def launch(self, name: str, argv: list[str], cwd: Path | None = None) -> Launched:
        """`argv` started in a session of its own (in `cwd`, if given), its output to `<name>.log`."""
        log = self.logs / f"{name}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(argv, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        self.running.append(Launched(name, process, log))
        return self.running[-1]

    def stop(self, launched: Launched) -> None:
        """SIGTERM to the component's session, SIGKILL if it has not exited in `STOP_SECONDS`."""
        if launched in self.running:
            self.running.remove(launched)
        if launched.process.poll() is not None:
            return
        os.killpg(launched.process.pid, signal.SIGTERM)
        try:
            launched.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(launched.process.pid, signal.SIGKILL)
            launched.process.wait(STOP_SECONDS)

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for launched in reversed(list(self.running)):
            self.stop(launched)


def wait_until(what: str, check: Callable[[], bool], component: Launched, seconds: float = START_SECONDS) -> None:
    """Poll `check` (its errors count as not yet) until it holds; `ComponentError` if `component` exits first
    or `seconds` pass."""
    deadline = time.monotonic() + seconds
    last = ""
    while time.monotonic() < deadline:
        if component.process.poll() is not None:
            raise component.failed(f"exited with {component.process.returncode} while waiting for {what}")
        try:
            if check():
                return
        except (httpx.HTTPError, OSError, ValueError, KeyError) as error:
            last = f" ({error})"
        time.sleep(0.2)
    raise component.failed(f"not ready: {what} took over {seconds:g} s{last}")


@dataclass(frozen=True)
class Cluster:
    """The running control plane: where its API is and how to reach it."""

    api: str
    ca: Path
    kubeconfig: Path

    def client(self, connections: int = 4) -> httpx.Client:
        """An API client: the cluster's CA, the admin token, nothing from the environment."""
        trust = ssl.create_default_context(cafile=str(self.ca))
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.Client(base_url=self.api, verify=trust, headers=headers, limits=limits, trust_env=False)


def certificates(directory: Path) -> dict[str, Path]:
    """A CA, the API server's certificate for 127.0.0.1 and a service-account signing key, as PEM files."""
    directory.mkdir()
    authority = trustme.CA()
    server = authority.issue_cert("127.0.0.1", "localhost", "kubernetes", "kubernetes.default")
    accounts = authority.issue_cert("service-accounts", key_type=trustme.KeyType.RSA)
    files = {name: directory / f"{name}.pem" for name in ("ca", "cert", "key", "accounts")}
    authority.cert_pem.write_to_path(str(files["ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["cert"]))
    server.private_key_pem.write_to_path(str(files["key"]))
    accounts.private_key_pem.write_to_path(str(files["accounts"]))
    return files


def kubeconfig(path: Path, api: str, ca: Path, token: str = TOKEN) -> None:
    """A kubeconfig for `token` (the admin's unless told), read by kube-scheduler and rulesched."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": api, "certificate-authority": str(ca)}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "admin"}}],
        "current-context": "bench",
    }
    path.write_text(yaml.safe_dump(config))


def start_etcd(etcd: Path, directory: Path, processes: Processes) -> str:
    """etcd with a fresh data directory on two free loopback ports; its client URL once healthy."""
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    argv = [str(etcd), "--name", "bench", "--data-dir", str(directory / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"bench={peer}"]  # fmt: skip
    launched = processes.launch("etcd", argv)
    wait_until("etcd /health", lambda: httpx.get(f"{client}/health", timeout=2).json()["health"] == "true", launched)
    return client


def apiserver_argv(program: Path, etcd: str, port: int, pki: dict[str, Path], minor: tuple[int, int]) -> list[str]:
    """kube-apiserver's flags: TLS on 127.0.0.1 only, the static token, RBAC. The admission plugins that need a
    controller or a kubelet to finish their work are off: ServiceAccount (no token controller) and
    TaintNodesByCondition (its `not-ready` taint would never be lifted without a node-lifecycle controller)."""
    tokens = pki["ca"].parent / "tokens.csv"
    tokens.write_text(f'{TOKEN},admin,admin-uid,"system:masters"\n')
    insecure = ["--insecure-port=0"] if minor < (1, 24) else []  # the flag is gone in 1.24; 0 turns it off before
    return [
        str(program), f"--etcd-servers={etcd}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--secure-port={port}", *insecure, f"--tls-cert-file={pki['cert']}", f"--tls-private-key-file={pki['key']}",
        f"--client-ca-file={pki['ca']}", f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
        f"--service-account-key-file={pki['accounts']}", f"--service-account-signing-key-file={pki['accounts']}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition", "--allow-privileged=true", "--v=1",
    ]  # fmt: skip


def control_plane(binaries: Binaries, directory: Path, processes: Processes, minor: tuple[int, int]) -> Cluster:
    """etcd and kube-apiserver running, the API ready and its `default` namespace made."""
    pki = certificates(directory / "pki")
    etcd = start_etcd(binaries.etcd, directory, processes)
    port = free_port()
    launched = processes.launch("kube-apiserver", apiserver_argv(binaries.apiserver, etcd, port, pki, minor))
    cluster = Cluster(f"https://127.0.0.1:{port}", pki["ca"], directory / "kubeconfig")
    kubeconfig(cluster.kubeconfig, cluster.api, cluster.ca)
    with cluster.client() as api:
        wait_until("kube-apiserver /readyz", lambda: api.get("/readyz", timeout=2).status_code == 200, launched)
        default = "/api/v1/namespaces/default"
        wait_until("the default namespace", lambda: api.get(default, timeout=2).status_code == 200, launched)
    return cluster


def node_labels(index: int, count: int) -> dict[str, str]:
    """Zones a, b, c in turn; `filter.xy.com` but on the last tenth; `DRAIN_LABEL` on the first tenth."""
    labels = {"kubernetes.io/hostname": node_name(index), "kubernetes.io/os": "linux",
              "topology.kubernetes.io/zone": "zone-" + "abc"[index % 3]}  # fmt: skip
    if index < count - count // UNLABELLED_SHARE:
        labels["filter.xy.com"] = "true"
    if index < count // UNLABELLED_SHARE:
        labels[DRAIN_LABEL] = "true"
    return labels


def node_name(index: int) -> str:
    return f"node-{index:03d}"


def create_nodes(api: httpx.Client, count: int) -> None:
    """`count` Nodes, Ready through their status subresource (no kubelet will report), 16 CPUs each; checked
    untainted, as kube-scheduler must see them."""
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "no kubelet: set by the benchmark",
             "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
    for index in range(count):
        name = node_name(index)
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels(index, count)}}
        api.post("/api/v1/nodes", json=node).raise_for_status()
        status = {"capacity": resources, "allocatable": resources, "conditions": [ready],
                  "addresses": [{"type": "Hostname", "address": name}]}  # fmt: skip
        patch = httpx.Headers({"Content-Type": "application/merge-patch+json"})
        api.patch(f"/api/v1/nodes/{name}/status", json={"status": status}, headers=patch).raise_for_status()
    nodes = api.get("/api/v1/nodes").raise_for_status().json()["items"]
    tainted = [n["metadata"]["name"] for n in nodes if n["spec"].get("taints")]
    if len(nodes) != count or tainted:
        raise ComponentError(f"kube-apiserver: {len(nodes)} nodes of {count} made, tainted: {tainted}")


def node_metrics(count: int) -> JSON:
    """A NodeMetricsList for the nodes, every CPU usage distinct (50m to 7400m), so that the CPU score ranks
    them and turning it around changes every ranking (rulesched reads it with `--metrics`)."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    step = next(n for n in range(37, 37 + count + 1) if math.gcd(n, count) == 1)  # a permutation of the ranks
    items = [
        {"metadata": {"name": node_name(index)}, "timestamp": stamp, "window": "15s",
         "usage": {"cpu": f"{50 + index * step % count * 7350 // count}m", "memory": f"{2048 + index * 300}Mi"}}
        for index in range(count)
    ]  # fmt: skip
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetricsList", "metadata": {}, "items": items}
