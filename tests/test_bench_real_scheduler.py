"""`bench/real_scheduler.py`, as far as it goes without a Kubernetes release's binaries: it refuses to start
without them, naming what is missing; the shadow rules it derives load, pass `rulesched check` and differ from
`rules/` in exactly the two known ways; the configuration it gives kube-scheduler registers rulesched as a
names-mode extender in the format each release reads.

The whole scenario needs kube-apiserver, kube-scheduler and etcd, which CI does not have: it is run by hand
(docs/performance.md). Marked `slow`, as the other benchmark tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.real_burst import pod, probes
from bench.real_cluster import DRAIN_LABEL, node_labels
from bench.real_components import scheduler_config
from bench.real_scheduler import expected_counts, order, paired, shadow_rules, table
from rulesched.cli import main as rulesched
from rulesched.rules.cel import make_engine
from rulesched.rules.loader import load_rule_book
from tests.builders import decide, make_context, make_node, make_usage
from tests.paths import REPO, RULES

pytestmark = pytest.mark.slow


def refusal(kube_bin: Path, etcd: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO / "bench" / "real_scheduler.py"), "--kube-bin", str(kube_bin), "--etcd", etcd]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_it_refuses_to_start_without_the_binaries_and_says_how_to_get_them(tmp_path: Path) -> None:
    finished = refusal(tmp_path, str(tmp_path / "etcd"))
    assert finished.returncode == 2
    assert f"kube-apiserver (looked for {tmp_path / 'kube-apiserver'})" in finished.stderr
    assert f"kube-scheduler (looked for {tmp_path / 'kube-scheduler'})" in finished.stderr
    assert f"etcd (looked for '{tmp_path / 'etcd'}')" in finished.stderr
    assert "any Kubernetes release's server binaries" in finished.stderr
    assert "built from source" in finished.stderr
    assert finished.stdout == ""


def test_it_names_only_what_is_missing(tmp_path: Path) -> None:
    """etcd found (any executable will do: the refusal comes before anything starts), the Kubernetes ones not."""
    finished = refusal(tmp_path, sys.executable)
    assert finished.returncode == 2
    assert "missing: kube-apiserver" in finished.stderr
    assert "etcd (looked for" not in finished.stderr


def sources(directory: Path) -> dict[str, Any]:
    book = load_rule_book([directory], make_engine("cpp"))
    return {rule_set.name: rule_set.source.model_dump() for rule_set in book.rule_sets}


def test_the_shadow_rules_pass_the_check(tmp_path: Path) -> None:
    shadow_rules(RULES, tmp_path / "shadow")
    assert rulesched(["check", str(tmp_path / "shadow")]) == 0


def test_the_shadow_rules_differ_from_the_shipped_ones_in_exactly_two_ways(tmp_path: Path) -> None:
    shadow_rules(RULES, tmp_path / "shadow")
    live, shadow = sources(RULES), sources(tmp_path / "shadow")
    assert set(shadow) - set(live) == {"shadow-drain"}
    assert set(live) <= set(shadow)
    changed = sorted(name for name in live if live[name] != shadow[name])
    assert changed == ["xy-least-cpu"]
    live_spec, shadow_spec = live["xy-least-cpu"]["spec"], shadow["xy-least-cpu"]["spec"]
    (live_score,), (shadow_score,) = live_spec["scores"], shadow_spec["scores"]
    assert (live_score["expression"], shadow_score["expression"]) == ("-variables.cpuUsed", "variables.cpuUsed")
    assert {**live_score, "expression": ""} == {**shadow_score, "expression": ""}
    assert {**live_spec, "scores": None} == {**shadow_spec, "scores": None}


def test_the_shadow_filter_keeps_only_probe_pods_off_the_drained_nodes(tmp_path: Path) -> None:
    shadow_rules(RULES, tmp_path / "shadow")
    book = load_rule_book([tmp_path / "shadow"], make_engine("cpp"))
    labels = node_labels(0, 50)
    assert DRAIN_LABEL in labels
    drained = make_context(make_node("node-000", labels), make_usage(cpu=1.0))
    probe, other = ({**p, "metadata": {**p["metadata"], "namespace": "burst"}} for p in (pod(0), pod(1)))
    assert decide(book, probe, [drained]).passed == []
    assert decide(book, other, [drained]).passed == ["node-000"]
    assert decide(load_rule_book([RULES], make_engine("cpp")), probe, [drained]).passed == ["node-000"]


def test_the_expected_counts_of_a_500_pod_burst() -> None:
    assert probes(500) == 100
    assert expected_counts(500) == {
        "filter": {"same": 400, "differs": 100, "dropped": 0},
        "prioritize": {"same": 0, "differs": 500, "dropped": 0},
    }


@pytest.mark.parametrize(
    ("minor", "api_version", "health"),
    [
        ((1, 20), "kubescheduler.config.k8s.io/v1beta1", True),
        ((1, 22), "kubescheduler.config.k8s.io/v1beta1", True),
        ((1, 24), "kubescheduler.config.k8s.io/v1beta3", False),
        ((1, 25), "kubescheduler.config.k8s.io/v1", False),
        ((1, 32), "kubescheduler.config.k8s.io/v1", False),
        ((1, 36), "kubescheduler.config.k8s.io/v1", False),
    ],
)
def test_kube_scheduler_is_given_rulesched_as_a_names_mode_extender(
    tmp_path: Path, minor: tuple[int, int], api_version: str, health: bool
) -> None:
    written = tmp_path / "scheduler.yaml"
    written.write_text(yaml.safe_dump(scheduler_config(minor, tmp_path / "kubeconfig", 18888, 10999)))
    config = yaml.safe_load(written.read_text())
    assert (config["apiVersion"], config["kind"]) == (api_version, "KubeSchedulerConfiguration")
    assert config["extenders"] == [{
        "urlPrefix": "http://127.0.0.1:18888", "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 1,
        "nodeCacheCapable": True, "enableHTTPS": False, "httpTimeout": "5s", "ignorable": False,
    }]  # fmt: skip
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "kubeconfig")
    assert config["leaderElection"] == {"leaderElect": False}
    served = {key: config.get(key) for key in ("healthzBindAddress", "metricsBindAddress")}
    assert served == dict.fromkeys(served, "127.0.0.1:10999" if health else None)


def test_runs_alternate_abba_and_each_pair_gives_one_ratio() -> None:
    assert order(3) == ["A", "B", "B", "A", "A", "B"]
    runs = [{"kind": kind, "pods_per_s": rate} for kind, rate in zip(order(2), (200, 180, 190, 200), strict=True)]
    found = paired(runs, "pods_per_s")
    assert found["ratios"] == [0.9, 0.95]
    assert found["mean"] == 0.925
    assert found["standard_error"] == 0.025
    assert paired(runs[:2], "pods_per_s")["standard_error"] is None


def test_the_table_says_how_many_pods_the_watches_and_the_final_list_saw_bound() -> None:
    run = {"run": 1, "kind": "A", "bound": 298, "bound_listed": 300, "watch_resumed": 3, "all_bound_s": 2.0,
           "pods_per_s": 150.0, "bind_rate": 160.0}  # fmt: skip
    ratio: dict[str, Any] = {"ratios": [], "mean": None, "standard_error": None}
    about = {"expected": expected_counts(300), "pods": 300, "pods_per_s": ratio, "bind_rate": ratio, "nodes": 50,
             "kube-scheduler": "Kubernetes v1.36.2", "config": "kubescheduler.config.k8s.io/v1", "seconds": 10.0,
             "kube-apiserver": "Kubernetes v1.36.2", "etcd": "etcd Version: 3.4.23"}  # fmt: skip
    row = table([run], about).splitlines()[2]
    assert row.startswith("| 1 | A | 298 / 300 | 3 | 2.0 | 150.0 | 160.0 |")
