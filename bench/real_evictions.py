"""Issue #39's end-to-end check of descheduling on a real control plane: does rulesched evict only the pods that
kube-scheduler can place elsewhere, once, from one replica?

Usage: `python bench/real_evictions.py --kube-bin DIR [--etcd PATH] [--kubectl PATH] [--quiet 60]
[--json FILE] [--logs DIR]`, where DIR holds `kube-apiserver`, `kube-scheduler` and `kube-controller-manager`
(any release's server binaries, or built from source), etcd is `etcd` on the PATH unless `--etcd` says
otherwise, and kubectl renders the deschedule overlay.

It starts etcd and kube-apiserver (`bench/real_cluster.py`), Node objects without kubelets (one payments node,
general nodes with 3 CPUs), the deschedule overlay's ServiceAccount, RBAC and admission policies
(`bench/real_identity.py`), two `rulesched serve --deschedule on` replicas acting as that ServiceAccount, sharing
the descheduler's Lease and one rules directory, kube-scheduler with the first replica as its extender, and
kube-controller-manager with the deployment, replicaset, disruption and garbage-collector controllers
(`bench/real_components.py`). Under rules v1 the four Deployments of `bench/real_evictions_world.py` are placed
(all on the payments node); then the rules are rewritten to v2 and the replicas reload them. It watches the pods
and the `Descheduled` Events rulesched writes until no eviction has come for `--quiet` seconds (and the
replacements are placed, or a bounded wait has passed), then prints the issue's table as it came out and each
expectation: exactly 2 evictions (the plain replicas), by one replica, the replacements on general nodes, the
other pods the same (uids), no further eviction. Exit status 0 when every expectation held, 1 when one did not
or a component failed, 2 when a program is missing. Loopback only, free ports, everything in one temporary
directory, every process stopped on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import real_cluster as kube
from bench import real_evictions_world as world
from bench.harness import ROOT, counted, free_port, reported
from bench.real_components import Rig, start_controller_manager, start_scheduler
from bench.real_identity import find_kubectl, identity
from bench.real_scheduler import kubernetes_minor

JSON = dict[str, Any]
REPLICAS = ("replica-a", "replica-b")
PLACE_SECONDS = 180.0
"""How long the Deployments' pods may take to be created and placed under rules v1."""
SETTLE_SECONDS = 240.0
"""After the reload, the most the script waits beyond `--quiet` for the replacements to be placed."""
POLL_SECONDS = 1.0


def replica_argv(name: str, rules: Path, kubeconfig: Path, port: int) -> list[str]:
    """`rulesched serve --deschedule on` for the real cluster, as replica `name` of the descheduler's Lease."""
    return [sys.executable, "-m", "rulesched", "serve", "--rules", str(rules), "--kubeconfig", str(kubeconfig),
            "--cluster", "on", "--deschedule", "on", "--deschedule-rate", str(world.EVICTIONS_PER_MINUTE),
            "--lease-identity", name, "--port", str(port), "--log-format", "text"]  # fmt: skip


def start_replicas(rig: Rig, rules: Path, kubeconfig: Path) -> dict[str, int]:
    """The two replicas, acting as `kubeconfig` says, ready; their ports by name."""
    ports = {}
    for name in REPLICAS:
        ports[name] = free_port()
        # In the checkout: `python -m rulesched` runs its rulesched, wherever the script was started from.
        launched = rig.processes.launch(name, replica_argv(name, rules, kubeconfig, ports[name]), cwd=ROOT)
        ready = lambda port=ports[name]: httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).is_success  # noqa: E731
        kube.wait_until(f"{name} /readyz", ready, launched)
    return ports


def create_world(api: httpx.Client) -> None:
    """The nodes (Ready through their status) and the workloads' namespace (the overlay makes the Lease's)."""
    for name, labels, cpus in world.nodes():
        api.post("/api/v1/nodes", json=world.node(name, labels)).raise_for_status()
        merge = {"Content-Type": "application/merge-patch+json"}
        api.patch(f"/api/v1/nodes/{name}/status", json=world.node_status(name, cpus), headers=merge).raise_for_status()
    api.post("/api/v1/namespaces", json={"metadata": {"name": world.NAMESPACE}}).raise_for_status()


def pods(api: httpx.Client) -> list[world.Placed]:
    listed = api.get(f"/api/v1/namespaces/{world.NAMESPACE}/pods").raise_for_status().json()["items"]
    return world.placed(listed)


def evicted(api: httpx.Client) -> list[str]:
    """The uids of the pods rulesched says it evicted: its `Descheduled` Events, each pod once."""
    listed = api.get(f"/api/v1/namespaces/{world.NAMESPACE}/events").raise_for_status().json()["items"]
    return sorted({e["involvedObject"]["uid"] for e in listed if e.get("reason") == "Descheduled"})


def place(api: httpx.Client, launched: kube.Launched) -> list[world.Placed]:
    """The Deployments created and their pods placed (at most `PLACE_SECONDS`)."""
    for workload in world.WORKLOADS:
        path = f"/apis/apps/v1/namespaces/{world.NAMESPACE}/deployments"
        api.post(path, json=world.deployment(workload)).raise_for_status()
    wanted = sum(w.replicas for w in world.WORKLOADS)
    placed = lambda: len([p for p in pods(api) if p.node]) == wanted  # noqa: E731
    kube.wait_until(f"{wanted} pods placed under rules v1", placed, launched, PLACE_SECONDS)
    return pods(api)


def evictions_by_replica(ports: dict[str, int]) -> dict[str, int]:
    """Each replica's `rulesched_evictions_total{outcome="evicted"}`, over its rule sets."""
    found = {}
    for name, port in ports.items():
        exposition = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        by = counted(exposition, "rulesched_evictions_total", "outcome")
        found[name] = by.get(("evicted",), 0)
    return found


def settle(api: httpx.Client, before: Sequence[world.Placed], quiet: float) -> tuple[list[str], float]:
    """Watch the evictions after the reload until none has come for `quiet` s and the moved pods' replacements
    are placed (or `SETTLE_SECONDS` more have passed); the pods evicted and the quiet time at the end."""
    started = last = time.monotonic()
    seen: list[str] = []
    moving = {p.uid for p in before if world.moves(p.workload)}
    while True:
        now_evicted = evicted(api)
        if now_evicted != seen:
            seen, last = now_evicted, time.monotonic()
        quiet_s = time.monotonic() - last
        live = [p for p in pods(api) if not p.terminating and p.uid not in moving]
        replaced = len([p for p in live if p.node and world.moves(p.workload)]) >= world.EXPECTED_EVICTIONS
        if quiet_s >= quiet and (replaced or time.monotonic() - started > quiet + SETTLE_SECONDS):
            return seen, quiet_s
        time.sleep(POLL_SECONDS)


@contextlib.contextmanager
def rig_of(binaries: kube.Binaries, logs: Path | None) -> Iterator[Rig]:
    """The control plane in a temporary directory; on the way out, every process stopped and, with `logs`, their
    logs copied there (also after a failure: that is when they are wanted)."""
    with tempfile.TemporaryDirectory(prefix="rulesched-evictions-") as directory:
        try:
            with kube.Processes(Path(directory)) as processes:
                minor = kubernetes_minor(binaries.scheduler)
                cluster = kube.control_plane(binaries, Path(directory), processes, minor)
                yield Rig(binaries, cluster, Path(directory), processes, minor)
        finally:
            if logs is not None:
                logs.mkdir(parents=True, exist_ok=True)
                for log in Path(directory).glob("*.log"):
                    shutil.copy2(log, logs / log.name)


def measured(binaries: kube.Binaries, kubectl: str, args: argparse.Namespace) -> tuple[world.Outcome, JSON]:
    """The whole scenario; what happened and what ran."""
    started_at = time.monotonic()
    quiet = args.quiet
    with rig_of(binaries, args.logs) as rig, rig.cluster.client() as api:
        create_world(api)
        extender = identity(api, rig.cluster, kubectl)
        rules = rig.directory / "rules"
        rules.mkdir()
        (rules / world.RULES_FILE).write_text(world.RULES_V1)
        ports = start_replicas(rig, rules, extender.kubeconfig)
        scheduler = start_scheduler(rig, ports[REPLICAS[0]])
        start_controller_manager(rig)
        before = place(api, scheduler)
        staged = rules / f".{world.RULES_FILE}.new"
        staged.write_text(world.RULES_V2)
        staged.replace(rules / world.RULES_FILE)  # one change: a reload never sees half a file
        evicted_uids, quiet_s = settle(api, before, quiet)
        outcome = world.Outcome(before, pods(api), evicted_uids, evictions_by_replica(ports), round(quiet_s, 1))
    about = {
        **{name: kube.version_of(getattr(binaries, attribute)) for name, attribute in
           (("kube-scheduler", "scheduler"), ("kube-apiserver", "apiserver"),
            ("kube-controller-manager", "controller_manager"), ("etcd", "etcd"))},
        "seconds": round(time.monotonic() - started_at, 1), "quiet": quiet, "replicas_as": extender.user,
    }  # fmt: skip
    return outcome, about


def report(outcome: world.Outcome, about: JSON, quiet: float) -> tuple[str, bool]:
    """The table, each expectation with yes or **no**, the counts and what ran; and whether all held."""
    checks = world.checks(outcome, quiet)
    lines = [world.table(outcome), ""]
    lines += [f"- {what}: {'yes' if held else '**no**'}" for what, held in checks]
    lines += [
        "",
        f"Evictions (Descheduled Events): {len(outcome.evicted)}; by replica (rulesched_evictions_total): "
        f"{dict(outcome.by_replica)}; no eviction in the last {outcome.quiet_s} s.",
        f"kube-apiserver: {about['kube-apiserver']}; kube-scheduler: {about['kube-scheduler']}; "
        f"kube-controller-manager: {about['kube-controller-manager']}; etcd: {about['etcd']}; the replicas as "
        f"{about['replicas_as']} (deploy/overlays/deschedule's RBAC and admission policies); {about['seconds']} s.",
    ]
    return "\n".join(lines), all(held for _, held in checks)


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    found.add_argument("--kube-bin", type=Path, required=True,
                       help="directory of kube-apiserver, kube-scheduler and kube-controller-manager")  # fmt: skip
    found.add_argument("--etcd", default="etcd", help="etcd's path, or a name on the PATH (default: etcd)")
    found.add_argument(
        "--kubectl", default="kubectl", help="kubectl, to render the deschedule overlay (default: kubectl)"
    )
    found.add_argument("--quiet", type=float, default=60.0, help="seconds without an eviction to end (default 60)")
    found.add_argument("--json", type=Path, help="also write the outcome here")
    found.add_argument("--logs", type=Path, help="copy every component's log into this directory at the end")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        binaries = kube.Binaries.found(args.kube_bin, args.etcd, controllers=True)
    except kube.MissingBinariesError as error:
        print(f"real_evictions: {error}", file=sys.stderr)
        return 2
    kubectl = find_kubectl(args.kubectl)
    if kubectl is None:
        print(f"real_evictions: missing: kubectl (looked for {args.kubectl!r}), to render the overlay", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: every process started is stopped too
    try:
        outcome, about = measured(binaries, kubectl, args)
    except (kube.ComponentError, TimeoutError, httpx.HTTPError) as error:
        print(f"real_evictions: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("real_evictions: interrupted; every process started was stopped", file=sys.stderr)
        return 130
    text, held = report(outcome, about, args.quiet)
    reported(text, [asdict(outcome)], args.json, about)
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
