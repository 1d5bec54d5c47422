"""kube-scheduler and kube-controller-manager on the throwaway control plane of `bench/real_cluster.py`, for the
real-control-plane scripts (`bench/real_scheduler.py`, `bench/real_evictions.py`): their configuration in the
format each release reads, started as the caller's processes, and waited for until healthy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import real_cluster as kube
from bench.harness import free_port

JSON = dict[str, Any]
CONTROLLERS = ("deployment", "replicaset", "disruption", "garbage-collector")
"""The controllers kube-controller-manager runs for Deployments and their pods: no node lifecycle (its taints
would never be lifted without kubelets), no service accounts or tokens."""


@dataclass(frozen=True)
class Rig:
    """What the components of one invocation share: the binaries, the running control plane, the directory
    their files go to, the processes, and the Kubernetes release (major, minor)."""

    binaries: kube.Binaries
    cluster: kube.Cluster
    directory: Path
    processes: kube.Processes
    minor: tuple[int, int]


def config_api(minor: tuple[int, int]) -> str:
    """The KubeSchedulerConfiguration version a kube-scheduler release reads: v1beta1 up to 1.22, v1beta3 in 1.23
    and 1.24, v1 from 1.25."""
    if minor >= (1, 25):
        return "kubescheduler.config.k8s.io/v1"
    return "kubescheduler.config.k8s.io/v1beta3" if minor >= (1, 23) else "kubescheduler.config.k8s.io/v1beta1"


def insecure_health(minor: tuple[int, int]) -> bool:
    """Whether kube-scheduler still serves /healthz over plain HTTP (`healthzBindAddress`, gone in 1.23)."""
    return minor < (1, 23)


def scheduler_config(minor: tuple[int, int], kubeconfig: Path, extender: int, health: int) -> JSON:
    """kube-scheduler's configuration: rulesched on port `extender` as its extender, in names mode
    (`nodeCacheCapable`), never ignored; no leader election; /healthz on port `health` where the release
    still serves it without TLS."""
    config: JSON = {
        "apiVersion": config_api(minor),
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
        "extenders": [{
            "urlPrefix": f"http://127.0.0.1:{extender}", "filterVerb": "filter", "prioritizeVerb": "prioritize",
            "weight": 1, "nodeCacheCapable": True, "enableHTTPS": False, "httpTimeout": "5s", "ignorable": False,
        }],
    }  # fmt: skip
    if insecure_health(minor):
        config["healthzBindAddress"] = config["metricsBindAddress"] = f"127.0.0.1:{health}"
    return config


def _secure(rig: Rig, port: int) -> list[str]:
    """Serving on 127.0.0.1:`port` over TLS, authenticating and authorizing its callers through the API."""
    kubeconfig = rig.cluster.kubeconfig
    return [f"--secure-port={port}", "--bind-address=127.0.0.1", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}"]  # fmt: skip


def start_scheduler(rig: Rig, extender: int) -> kube.Launched:
    """kube-scheduler, configured for rulesched on port `extender`, running and healthy."""
    health = free_port()
    config = rig.directory / f"scheduler-{extender}.yaml"
    config.write_text(yaml.safe_dump(scheduler_config(rig.minor, rig.cluster.kubeconfig, extender, health)))
    argv = [str(rig.binaries.scheduler), f"--config={config}", "--v=1"]
    if insecure_health(rig.minor):
        argv.append("--secure-port=0")
        url = f"http://127.0.0.1:{health}/healthz"
    else:
        argv += _secure(rig, health)
        url = f"https://127.0.0.1:{health}/healthz"
    launched = rig.processes.launch(f"kube-scheduler-{extender}", argv)
    _healthy(url, launched)
    return launched


def controller_names(minor: tuple[int, int]) -> list[str]:
    """`CONTROLLERS` as kube-controller-manager's `--controllers` names them: with a `-controller` suffix from
    1.28 (1.36 knows only these; 1.28 to 1.35 also the old names), without before."""
    if minor >= (1, 28):
        return [f"{name}-controller" for name in CONTROLLERS]
    return [name.replace("-", "") for name in CONTROLLERS]


def controller_manager_argv(rig: Rig, port: int) -> list[str]:
    """kube-controller-manager's flags: the admin kubeconfig for every controller, no leader election."""
    assert rig.binaries.controller_manager is not None
    kubeconfig = rig.cluster.kubeconfig
    return [str(rig.binaries.controller_manager), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            f"--controllers={','.join(controller_names(rig.minor))}", "--use-service-account-credentials=false",
            *_secure(rig, port), "--v=1"]  # fmt: skip


def start_controller_manager(rig: Rig) -> kube.Launched:
    """kube-controller-manager running `CONTROLLERS`, healthy."""
    port = free_port()
    launched = rig.processes.launch("kube-controller-manager", controller_manager_argv(rig, port))
    _healthy(f"https://127.0.0.1:{port}/healthz", launched)
    return launched


def _healthy(url: str, launched: kube.Launched) -> None:
    # Its serving certificate is self-signed, made at start: nothing to verify it against.
    healthy = lambda: httpx.get(url, verify=False, timeout=2).status_code == 200  # noqa: E731
    kube.wait_until(f"{launched.name} /healthz", healthy, launched)
