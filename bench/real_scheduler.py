"""Issue #27's check against a real kube-scheduler: are a shadow book's comparisons exact on real traffic, and
what does the shadow book cost kube-scheduler's throughput?

Usage: `python bench/real_scheduler.py --kube-bin DIR [--etcd PATH] [--pairs 3] [--pods 500] [--nodes 50]
[--json FILE]`, where DIR holds `kube-apiserver` and `kube-scheduler` (any release's server binaries, or built
from source) and etcd is `etcd` on the PATH unless `--etcd` says otherwise.

One etcd and kube-apiserver per invocation (`bench/real_cluster.py`), `--nodes` Node objects without kubelets,
then `--pairs` pairs of runs in ABBA order: A, rulesched serving the repository's `rules/`; B, the same with
`--shadow-rules`, the same rules with two known differences (`shadow_rules`). Each run starts a fresh rulesched
(names mode, registered as kube-scheduler's extender, nodes, pods and namespaces from the API, node usage from
a metrics file) and a fresh kube-scheduler, creates a burst of `--pods` pods (`bench/real_burst.py`) and times
it from the first create until all are bound. For every B run, once its shadow queue has drained (bounded
wait), `/shadow`'s comparisons per verb are checked against the expected counts and against
`rulesched_shadow_comparisons_total`. Reported: a Markdown table, one row a run, and the B/A throughput ratio of
each pair, their mean and its standard error; the exit status is 1 when a check failed, 2 when a binary is
missing. Loopback only, free ports, everything in one temporary directory, every process stopped on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import real_cluster as kube
from bench.harness import ROOT, Server, counted, reported, started
from bench.real_burst import PROBE_LABEL, burst, delete_pods, probes
from bench.real_components import Rig, config_api, start_scheduler

JSON = dict[str, Any]
VERBS = ("filter", "prioritize")
SYNC_SECONDS = 3.0
"""How long kube-scheduler is given, once healthy, to fill its informers before the burst."""
DRAIN_SECONDS = 120.0
"""How long a B run waits for its shadow queue to empty before its counts are read."""
SHADOW_DRAIN = f"""# Shadow only: probe pods may not go to drained nodes.
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: shadow-drain
spec:
  matchConditions:
  - name: probe-pods
    expression: "has(pod.metadata.labels) && '{PROBE_LABEL}' in pod.metadata.labels"
  filters:
  - name: avoid-drained
    expression: "!(has(node.metadata.labels) && '{kube.DRAIN_LABEL}' in node.metadata.labels)"
    message: node is being drained (shadow)
"""
"""The shadow book's own rule set: its filter differs from the live one's for every probe pod."""


def shadow_rules(rules: Path, into: Path) -> None:
    """`rules` copied to `into` with two differences: `xy-least-cpu`'s CPU score turned around (every prioritize
    call differs) and `SHADOW_DRAIN` added (every probe pod's filter call differs, no pod left without a node)."""
    shutil.copytree(rules, into)
    scored = into / "xy-least-cpu.yaml"
    text = scored.read_text()
    turned = text.replace("-variables.cpuUsed", "variables.cpuUsed")
    if turned == text:
        raise ValueError(f"{scored}: no `-variables.cpuUsed` score to turn around")
    scored.write_text(turned)
    (into / "shadow-drain.yaml").write_text(SHADOW_DRAIN)


def expected_counts(pods: int) -> dict[str, JSON]:
    """What a B run's shadow compares, per verb, for a burst of `pods`."""
    return {
        "filter": {"same": pods - probes(pods), "differs": probes(pods), "dropped": 0},
        "prioritize": {"same": 0, "differs": pods, "dropped": 0},
    }


def shadow_counts(extender: str, pods: int) -> JSON:
    """A B run's comparisons per verb from `/shadow` and from its counter, once its queue has drained (at most
    `DRAIN_SECONDS`), and whether they are the expected ones and agree."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while True:
        shadow = httpx.get(f"{extender}/shadow", timeout=5).json()
        done = shadow["compared"]["calls"] == shadow["compared"]["compared"] + shadow["compared"]["dropped"]
        if (shadow["queue"]["waiting"] == 0 and done) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    exposition = httpx.get(f"{extender}/metrics", timeout=5).text
    by_outcome = counted(exposition, "rulesched_shadow_comparisons_total", "verb", "outcome")
    by_metric = {verb: {o: by_outcome.get((verb, o), 0) for o in ("same", "differs", "dropped")} for verb in VERBS}
    counts = {verb: shadow["comparisons"][verb] for verb in VERBS}
    return {"counts": counts, "metric": by_metric, "expected": counts == expected_counts(pods),
            "agree": counts == by_metric, "headline": shadow["headline"], "made": shadow["made"]}  # fmt: skip


class Bench:
    """What every run of one invocation shares: the binaries, the cluster, the files, the processes."""

    def __init__(self, binaries: kube.Binaries, directory: Path, processes: kube.Processes, nodes: int) -> None:
        self.binaries, self.directory, self.processes = binaries, directory, processes
        self.minor = kubernetes_minor(binaries.scheduler)
        self.cluster: kube.Cluster = kube.control_plane(binaries, directory, processes, self.minor)
        self.rig = Rig(binaries, self.cluster, directory, processes, self.minor)
        with self.cluster.client() as api:
            kube.create_nodes(api, nodes)
        self.files = directory / "files"
        self.files.mkdir()
        shutil.copytree(ROOT / "rules", self.files / "rules-live")
        shadow_rules(ROOT / "rules", self.files / "rules-shadow")
        (self.files / "metrics.json").write_bytes(orjson.dumps(kube.node_metrics(nodes)))

    def run(self, number: int, kind: str, pods: int) -> JSON:
        """Run `number`: a fresh rulesched (with the shadow book for B) and kube-scheduler, one burst."""
        server = Server(f"rulesched-{number}-{kind}", "rulesched", "live", "cpp", (),
                        shadow="shadow" if kind == "B" else None, kubeconfig=str(self.cluster.kubeconfig))  # fmt: skip
        log = self.directory / f"{server.name}.log"
        with contextlib.ExitStack() as stack:
            try:
                process, port = stack.enter_context(started(server, self.files, log))
            except RuntimeError as error:
                raise kube.ComponentError(str(error)) from None
            extender = f"http://127.0.0.1:{port}"
            launched = kube.Launched(server.name, process, log)
            kube.wait_until(
                "rulesched /readyz", lambda: httpx.get(f"{extender}/readyz", timeout=2).is_success, launched
            )
            scheduler = start_scheduler(self.rig, port)
            stack.callback(self.processes.stop, scheduler)
            time.sleep(SYNC_SECONDS)
            found = {"run": number, "kind": kind, **burst(self.cluster, f"burst-{number}-{kind.lower()}", pods)}
            if kind == "B":
                found["shadow"] = shadow_counts(extender, pods)
            exposition = httpx.get(f"{extender}/metrics", timeout=5).text
            answered = counted(exposition, "rulesched_requests_total", "verb", "code")
            found["answered"] = {verb: answered.get((verb, "200"), 0) for verb in VERBS}
        delete_pods(self.cluster, found["namespace"])
        return found


def kubernetes_minor(program: Path) -> tuple[int, int]:
    """(major, minor) of a Kubernetes binary, from its `--version`."""
    said = kube.version_of(program)
    try:
        return kube.minor_of(said)
    except ValueError:
        raise kube.ComponentError(f"{program} --version said {said!r}: not a Kubernetes release") from None


def order(pairs: int) -> list[str]:
    """A and B in ABBA order, so that a drift over the invocation falls on both alike."""
    return [kind for pair in range(pairs) for kind in ("AB" if pair % 2 == 0 else "BA")]


def paired(runs: Sequence[JSON], key: str) -> JSON:
    """B's `key` over A's, pair by pair: the ratios, their mean and its standard error (None for one pair)."""
    ratios = []
    for first, second in zip(runs[::2], runs[1::2], strict=False):
        by_kind = {first["kind"]: first[key], second["kind"]: second[key]}
        if by_kind.get("A") and by_kind.get("B") is not None:
            ratios.append(by_kind["B"] / by_kind["A"])
    mean = statistics.fmean(ratios) if ratios else None
    error = statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else None
    return {"ratios": [round(r, 3) for r in ratios], "mean": _round(mean), "standard_error": _round(error)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def passed(runs: Sequence[JSON], pods: int) -> bool:
    """Every pod bound in every run, each pod's filter and prioritize answered, every B run's counts as expected
    and the same in `/shadow` and in its counter."""
    shadows = [r["shadow"] for r in runs if "shadow" in r]
    answered = all(r["answered"] == dict.fromkeys(VERBS, pods) for r in runs)
    return all(r["all_bound"] for r in runs) and answered and all(s["expected"] and s["agree"] for s in shadows)


def table(runs: Sequence[JSON], about: JSON) -> str:
    """The runs as a Markdown table, then the expected counts, the paired ratios and what ran."""
    lines = [
        "| run | kind | pods bound (watched / listed) | watches resumed | first create → all bound s | pods/s "
        "| bind rate pods/s | filter compared / differs / dropped | prioritize compared / differs / dropped "
        "| as expected | /shadow = metric |",
        "|---:|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in runs:
        shadow = r.get("shadow")
        verbs = [_counts(shadow["counts"][verb]) for verb in VERBS] if shadow else ["", ""]
        checks = [_yes(shadow["expected"]), _yes(shadow["agree"])] if shadow else ["", ""]
        lines.append(f"| {r['run']} | {r['kind']} | {r['bound']} / {r['bound_listed']} | {r['watch_resumed']} "
                     f"| {r['all_bound_s']} | {r['pods_per_s']} "
                     f"| {r['bind_rate']} | {' | '.join(verbs)} | {' | '.join(checks)} |")  # fmt: skip
    expected = about["expected"]
    lines += [
        "",
        f"Expected per B run ({about['pods']} pods): filter {_counts(expected['filter'])}, "
        f"prioritize {_counts(expected['prioritize'])}.",
        f"B/A, paired: pods/s {_ratio(about['pods_per_s'])}; bind rate {_ratio(about['bind_rate'])}.",
        f"kube-scheduler: {about['kube-scheduler']} ({about['config']}); kube-apiserver: {about['kube-apiserver']}; "
        f"etcd: {about['etcd']}; {about['nodes']} nodes; {about['seconds']} s.",
    ]
    return "\n".join(lines)


def _counts(counts: JSON) -> str:
    return f"{counts['same'] + counts['differs']} / {counts['differs']} / {counts['dropped']}"


def _yes(value: bool) -> str:
    return "yes" if value else "**no**"


def _ratio(found: JSON) -> str:
    if found["standard_error"] is None:
        return f"{found['mean']} (pairs: {found['ratios']}; no standard error without two pairs)"
    return f"{found['mean']} ± {found['standard_error']} (1 s.e.; pairs: {found['ratios']})"


def measured(binaries: kube.Binaries, args: argparse.Namespace) -> tuple[list[JSON], JSON]:
    """Every run of the invocation, and what they share (versions, expected counts, paired ratios)."""
    started_at = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="rulesched-real-") as directory,
        kube.Processes(Path(directory)) as processes,
    ):
        bench = Bench(binaries, Path(directory), processes, args.nodes)
        runs = []
        for number, kind in enumerate(order(args.pairs), 1):
            runs.append(bench.run(number, kind, args.pods))
            print(orjson.dumps(runs[-1]).decode(), file=sys.stderr, flush=True)
    about = {
        **{name: kube.version_of(getattr(binaries, attribute)) for name, attribute in
           (("kube-scheduler", "scheduler"), ("kube-apiserver", "apiserver"), ("etcd", "etcd"))},
        "config": config_api(bench.minor), "nodes": args.nodes, "pods": args.pods,
        "expected": expected_counts(args.pods), "pods_per_s": paired(runs, "pods_per_s"),
        "bind_rate": paired(runs, "bind_rate"), "seconds": round(time.monotonic() - started_at, 1),
    }  # fmt: skip
    return runs, about


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    found.add_argument("--kube-bin", type=Path, required=True, help="directory of kube-apiserver and kube-scheduler")
    found.add_argument("--etcd", default="etcd", help="etcd's path, or a name on the PATH (default: etcd)")
    found.add_argument("--pairs", type=int, default=3, help="pairs of A and B runs, in ABBA order (default 3)")
    found.add_argument("--pods", type=int, default=500, help="pods a burst (default 500)")
    found.add_argument("--nodes", type=int, default=50, help="Node objects, at least 10 (default 50)")
    found.add_argument("--json", type=Path, help="also write the runs and the summary here")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    options = parser()
    args = options.parse_args(argv)
    if args.pairs < 1 or args.pods < 1 or args.nodes < 10:
        options.error("--pairs and --pods must be at least 1, --nodes at least 10")
    try:
        binaries = kube.Binaries.found(args.kube_bin, args.etcd)
    except kube.MissingBinariesError as error:
        print(f"real_scheduler: {error}", file=sys.stderr)
        return 2
    # Stopped from outside: unwind, so that every process started is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        runs, about = measured(binaries, args)
    except (kube.ComponentError, TimeoutError, httpx.HTTPError) as error:
        print(f"real_scheduler: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("real_scheduler: interrupted; every process started was stopped", file=sys.stderr)
        return 130
    reported(table(runs, about), runs, args.json, about)
    return 0 if passed(runs, args.pods) else 1


if __name__ == "__main__":
    raise SystemExit(main())
