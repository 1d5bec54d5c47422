"""`rulesched tune` end to end: on the shipped example recording and the example cluster's files, its text,
JSON and Markdown reports, `--write` (only the weight lines change), the scheduler configuration's weights,
the search's bounds, its noise test and its held-out half, and the errors it gives for bad input."""

from __future__ import annotations

import difflib
import itertools
import json
import random
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.rules.cel import make_engine
from rulesched.rules.loader import load_rule_book
from rulesched.tools.inputs import InputError
from rulesched.tools.replay.markdown import LIMIT
from rulesched.tools.tune.config import ConfigError, read_profile
from rulesched.tools.tune.kube import DEFAULT_WEIGHTS
from rulesched.tools.tune.model import Arrival, Scene, Weights, simulate
from rulesched.tools.tune.report import FIGURES
from rulesched.tools.tune.scene import from_files
from rulesched.tools.tune.search import Search, Trial, candidates, current_weights, judge, loss, tune
from rulesched.tools.tune.write import rewritten
from tests.builders import load_spec, make_node, rule_set, write_rules
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, EXAMPLES, RULES, SCHEDULER_FIXTURES
from tests.tools.test_tune_model import START, arrival

RECORDING = EXAMPLES / "recording"
QUICK = ["--trials", "4", "--seeds", "2"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["tune", "--rules", str(RULES), *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_tune_on_the_example_recording_reports_current_and_best_weights(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--recording", str(RECORDING), "--output", "json", *QUICK)
    assert status == 0
    found = json.loads(out)
    assert found["pods"] == 5
    assert found["nodes"] == 4
    assert found["current"]["weights"]["rules"]["memory-pressure/most-free-memory"] == 0.5
    assert found["current"]["weights"]["extender"] == 1
    assert set(found["current"]["figures"]) >= {"max/mean", "stddev", "empty", "spread"}
    assert found["search"] | {"seconds": 0} == {
        "tried": 4,
        "seeds": 2,
        "seed": 1,
        "seconds": 0,
        "cutShort": False,
        "holdout": True,
    }
    assert isinstance(found["podsMoved"], int)


def test_the_text_report_names_the_weights_and_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--recording", str(RECORDING), *QUICK)
    assert status == 0
    assert out.startswith("tuned for balance over 5 pods on 4 nodes")
    assert "xy-least-cpu/least-cpu=1" in out
    assert "kept the current weights" in out or "proposed" in out


def test_the_markdown_report_fits_a_pull_request_comment(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--recording", str(RECORDING), "--output", "markdown", *QUICK)
    assert status == 0
    assert out.startswith("### ")
    assert "rulesched tune (balance)" in out
    assert "| `xy-least-cpu/least-cpu` | 1 |" in out
    assert "| `extenders[].weight` | 1 |" in out
    assert len(out) < LIMIT


def test_the_same_seed_gives_the_same_report(capsys: pytest.CaptureFixture[str]) -> None:
    reports = []
    for _ in range(2):
        _, out, _ = run(capsys, "--recording", str(RECORDING), "--output", "json", *QUICK)
        found = json.loads(out)
        found["search"]["seconds"] = 0
        reports.append(found)
    assert reports[0] == reports[1]


def test_tune_places_the_pending_pods_of_the_example_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    pods = EXAMPLES / "cluster" / "pods.yaml"
    files = ["--nodes", str(EXAMPLE_NODES), "--pods", str(pods), "--metrics", str(EXAMPLE_METRICS)]
    status, out, _ = run(capsys, *files, "--output", "json", "--objective", "pack", *QUICK)
    assert status == 0
    found = json.loads(out)
    assert found["objective"] == "pack"
    assert found["pods"] == 1


def test_write_changes_only_the_weight_lines_and_prints_the_extender_weight(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "tuned"
    status, out, _ = run(capsys, "--recording", str(RECORDING), "--write", str(target), *QUICK)
    assert status == 0
    assert "set extenders[].weight:" in out
    written = sorted(p.name for p in target.iterdir())
    assert written == sorted(p.name for p in RULES.iterdir() if p.suffix == ".yaml")
    for name in written:
        changed = _changed_lines((RULES / name).read_text(), (target / name).read_text())
        assert all(line.strip().startswith("weight:") for line in changed), name


def test_rewritten_keeps_comments_and_order_and_adds_a_missing_weight() -> None:
    text = (RULES / "xy-least-cpu.yaml").read_text()
    new = rewritten(text, {"xy-least-cpu/least-cpu": 2.5})
    assert _changed_lines(text, new) == ["    weight: 2.5"]
    again = rewritten(new, {"xy-least-cpu/least-cpu": 4.0})
    assert _changed_lines(new, again) == ["    weight: 2.5", "    weight: 4"]
    book = load_rule_book([_single(new)], make_engine("cpp"))
    assert current_weights(book, 1.0).rules["xy-least-cpu/least-cpu"] == 2.5


def _single(text: str) -> Path:
    import tempfile

    directory = Path(tempfile.mkdtemp())
    (directory / "rules.yaml").write_text(text)
    return directory


def _changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line[1:] for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_scheduler_config_sets_the_plugin_weights_and_the_extenders(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: rulesched
  plugins:
    score:
      disabled: [{name: ImageLocality}]
      enabled: [{name: NodeResourcesBalancedAllocation, weight: 4}]
extenders:
- urlPrefix: http://127.0.0.1:8888
  weight: 5
"""
    )
    profile = read_profile(config)
    assert profile.extender == 5
    assert profile.plugins["NodeResourcesBalancedAllocation"] == 4
    assert "ImageLocality" not in profile.plugins
    assert profile.plugins["TaintToleration"] == DEFAULT_WEIGHTS["TaintToleration"]
    real = read_profile(SCHEDULER_FIXTURES / "basic" / "scheduler-config.yaml")
    assert (dict(real.plugins), real.extender) == (dict(DEFAULT_WEIGHTS), 1.0)


def test_a_bad_scheduler_config_is_refused_with_its_field(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("kind: KubeSchedulerConfiguration\nextenders: [{weight: 0}]\n")
    with pytest.raises(ConfigError, match=r"extenders\[0\]\.weight 0"):
        read_profile(config)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--recording", "x", "--nodes", "n.yaml"], "not both"),
        ([], "give --recording DIR"),
        (["--recording", "x", "--trials", "0"], "--trials 1..1000"),
        (["--recording", "/no/such/recording"], "no such recording"),
    ],
)
def test_bad_input_is_a_clear_error(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    status, _, err = run(capsys, *args)
    assert status == 2
    assert message in err


def test_a_pods_file_with_no_pod_to_place_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text("kind: PodList\nitems: []\n")
    status, _, err = run(capsys, "--nodes", str(EXAMPLE_NODES), "--pods", str(pods))
    assert status == 2
    assert "no pod without spec.nodeName" in err


# -- the search --------------------------------------------------------------------------------------------------


def trial(losses: list[float]) -> Trial:
    return Trial(Weights({}, 1.0), [{} for _ in losses], losses)


def test_a_gain_within_the_noise_is_not_proposed() -> None:
    current = trial([1.20, 1.10, 1.15])
    assert judge(current, trial([1.12, 1.16, 1.08]))[0] is False
    assert judge(current, trial([1.01, 1.02, 1.01]))[0] is True
    assert judge(current, current) == (False, "no weights tried do better than the current ones")


def spread_scene() -> Scene:
    nodes = [
        make_node(f"node-{i}", {"kubernetes.io/hostname": f"node-{i}"}, {"cpu": "8", "memory": "8Gi"}) for i in range(4)
    ]
    loads = {"node-0": (0.2, 0.0), "node-1": (1.5, 0.0), "node-2": (3.0, 0.0), "node-3": (4.5, 0.0)}
    arrivals: list[Arrival] = [arrival(0.3 * i, f"web-{i}", cpu=0.3 if i % 2 else 1.2) for i in range(16)]
    return Scene(nodes, loads, [], arrivals, START, 10.0, 30.0)


def test_the_search_is_bounded_and_checks_its_best_on_the_held_out_half(tmp_path: Path) -> None:
    spec = "scores:\n- name: least-used\n  expression: -(metrics.cpu.usage + recent.estimates.cpu)\n"
    book = load_spec(tmp_path, make_engine("cpp"), spec, name="balance")
    result = tune(spread_scene(), book, DEFAULT_WEIGHTS, current_weights(book, 1.0), Search(trials=6, seeds=2))
    assert result.tried == 6
    assert not result.cut_short
    # The extender's weight raised above kube-scheduler's own request-based plugins balances the real use.
    assert result.best.weights.extender > 1
    assert result.best.loss < result.current.loss
    assert result.held_out is not None
    assert set(result.held_out) == {"current", "best"}
    assert result.proposed
    assert 0 < result.moved <= len(spread_scene().arrivals)  # counted over every arrival
    cut = tune(spread_scene(), book, DEFAULT_WEIGHTS, current_weights(book, 1.0), Search(trials=50, max_seconds=1e-6))
    assert cut.cut_short
    assert cut.tried == 1


def test_only_the_weights_of_rules_that_ranked_nodes_are_searched(tmp_path: Path) -> None:
    spec = """
    scores:
    - name: least-used
      expression: -(metrics.cpu.usage + recent.estimates.cpu)
    """
    never = """
    matchConditions:
    - name: no-pod
      expression: "false"
    scores:
    - name: unused
      expression: "1.0"
      weight: 3
    """
    write_rules(tmp_path / "rules", rule_set("never", never), name="never.yaml")
    book = load_spec(tmp_path, make_engine("cpp"), spec, name="balance")
    current = current_weights(book, 1.0)
    assert current.rules == {"balance/least-used": 1.0, "never/unused": 3.0}
    outcome = simulate(spread_scene(), book, DEFAULT_WEIGHTS, current, 1)
    assert outcome.scored == {"balance/least-used"}
    drawn = list(itertools.islice(candidates(current, outcome.scored, random.Random(1)), 30))
    assert {w.rules["never/unused"] for w in drawn} == {3.0}
    assert len({w.rules["balance/least-used"] for w in drawn}) > 1


def test_pack_counts_empty_nodes_and_never_lets_a_node_go_over() -> None:
    figures = {"max/mean": 1.5, "stddev": 1.0, "empty": 2.0, "over": 0.0, "unschedulable": 0.0}
    fuller = figures | {"empty": 3.0}
    assert loss(fuller, "pack", 8) < loss(figures, "pack", 8)
    assert loss(fuller | {"over": 1.0}, "pack", 8) > loss(figures, "pack", 8)
    assert loss(figures, "balance", 8) == 1.5


def test_pods_to_place_use_what_their_workloads_pods_use(tmp_path: Path) -> None:
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "controller": True}]
    labels = {"app": "web", "pod-template-hash": "5d8f"}

    def pod(name: str, node: str | None) -> dict[str, object]:
        metadata = {"name": name, "namespace": "shop", "labels": labels, "ownerReferences": owner}
        spec: dict[str, object] = {"containers": [{"name": "web", "resources": {"requests": {"cpu": "500m"}}}]}
        return {"metadata": metadata, "spec": spec | ({"nodeName": node} if node else {})}

    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"kind": "PodList", "items": [pod("web-1", "k8s-node1"), pod("web-2", None)]}))
    usage = {"name": "web", "usage": {"cpu": "1500m", "memory": "100Mi"}}
    item = {"metadata": {"name": "web-1", "namespace": "shop"}, "containers": [usage]}
    metrics = tmp_path / "pod-metrics.json"
    metrics.write_text(json.dumps({"kind": "PodMetricsList", "items": [item]}))
    paths = {"nodes": EXAMPLE_NODES, "pods": pods, "metrics": EXAMPLE_METRICS, "pod-metrics": metrics}
    (learnt,) = from_files(paths, 1.0, 15.0, 30.0).arrivals
    assert learnt.cpu == pytest.approx(1.5)
    (fallback,) = from_files(paths | {"pod-metrics": None}, 1.0, 15.0, 30.0).arrivals
    assert fallback.cpu == pytest.approx(0.5)
    metrics.write_text("{}")
    with pytest.raises(InputError, match="not a PodMetricsList"):
        from_files(paths, 1.0, 15.0, 30.0)


def test_the_markdown_report_of_a_huge_rule_book_stays_within_a_comment() -> None:
    from rulesched.tools.tune.report import ROWS, render_markdown

    rules = {f"set-{'x' * 200}/rule-{i:05d}": 1.0 for i in range(5000)}
    side = {"weights": {"rules": rules, "extender": 1.0}, "figures": dict.fromkeys(FIGURES, 1.0)}
    best = {
        "weights": {"rules": rules | {f"set-{'x' * 200}/rule-04999": 4.0}, "extender": 3.0},
        "figures": side["figures"],
    }
    search = {"tried": 2, "seeds": 3, "seed": 1, "seconds": 1.0, "cutShort": False, "holdout": False}
    found = {"objective": "balance", "pods": 1, "nodes": 1, "current": side, "best": best, "proposed": True}
    found |= {"reason": "better", "podsMoved": 1, "heldOut": None, "search": search}
    comment = render_markdown(found)
    assert len(comment) < LIMIT
    assert f"{5000 - ROWS} more score rules not shown" in comment
    assert "| `extenders[].weight` | 1 | 3 |" in comment
    assert "| 1 | 4 |" in comment  # the changed weight is listed, though last of 5000


def test_a_scoring_strategy_the_model_lacks_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        """\
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: rulesched
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
"""
    )
    with pytest.raises(ConfigError, match="models LeastAllocated over cpu and memory only"):
        read_profile(config)


def test_write_puts_the_proposed_weights_in_the_rules_and_prints_the_extenders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rules = tmp_path / "rules"
    write_rules(rules, "# least used first\n" + rule_set("balance", LEAST_USED), name="balance.yaml")
    files = cluster_files(tmp_path, loads=[0.2, 1.5, 3.0, 4.5], pods=16)
    status = main(["tune", "--rules", str(rules), *files, "--trials", "8", "--write", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert status == 0
    assert "proposed: better by" in out
    extender = out.split("set extenders[].weight: ")[1].strip()
    assert extender != "1"
    written = (tmp_path / "out" / "balance.yaml").read_text()
    assert written.startswith("# least used first\n")
    changed = _changed_lines((rules / "balance.yaml").read_text(), written)
    assert all(line.strip().startswith("weight:") for line in changed)


LEAST_USED = "scores:\n- name: least-used\n  expression: -(metrics.cpu.usage + recent.estimates.cpu)\n"


def cluster_files(directory: Path, loads: list[float], pods: int) -> list[str]:
    """Nodes of 8 cores using `loads`, and `pods` pods of one Deployment to place, whose running pod uses 1.2
    cores for its 500m request (its pod metrics)."""
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "controller": True}]
    labels = {"app": "web", "pod-template-hash": "5d8f"}

    def pod(name: str, node: str | None) -> dict[str, object]:
        metadata = {"name": name, "namespace": "shop", "uid": f"uid-{name}", "labels": labels, "ownerReferences": owner}
        spec: dict[str, object] = {"containers": [{"name": "web", "resources": {"requests": {"cpu": "500m"}}}]}
        return {"metadata": metadata, "spec": spec | ({"nodeName": node} if node else {})}

    names = [f"node-{i}" for i in range(len(loads))]
    nodes = [make_node(n, {"kubernetes.io/hostname": n}, {"cpu": "8", "memory": "16Gi", "pods": "110"}) for n in names]
    samples = [
        {
            "metadata": {"name": n},
            "timestamp": "2026-11-01T00:00:00Z",
            "usage": {"cpu": f"{round(load * 1000)}m", "memory": "1Gi"},
        }
        for n, load in zip(names, loads, strict=True)
    ]
    items = [pod("web-0", names[0])] + [pod(f"web-{i}", None) for i in range(1, pods + 1)]
    used = {
        "metadata": {"name": "web-0", "namespace": "shop"},
        "containers": [{"name": "web", "usage": {"cpu": "1200m", "memory": "10Mi"}}],
    }
    written = {
        "nodes": {"kind": "NodeList", "items": nodes},
        "metrics": {"kind": "NodeMetricsList", "items": samples},
        "pods": {"kind": "PodList", "items": items},
        "pod-metrics": {"kind": "PodMetricsList", "items": [used]},
    }
    args = []
    for name, document in written.items():
        path = directory / f"{name}.json"
        path.write_text(json.dumps(document))
        args += [f"--{name}", str(path)]
    return args
