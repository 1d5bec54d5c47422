"""`has(<context name>)` (`has(metrics)`) is accepted and true, on both engines; `has(<other name>)` is refused.

Standard CEL refuses `has()` of a bare name; rulesched rewrites it to `true` for the names a rule reads
(`rewrite.presence_of_names`), which are always defined (issue #23, point 1). Shown through `rulesched
check`, `rulesched eval`, `rulesched replay`, a running server against the loopback Prometheus, the
fast engine against the reference evaluation, and the analysis the caches key on (which reads nothing
for it). A comprehension variable or an unknown name stays refused, named. (The differential test over
random rule books has a `has(metrics)` rule too: `tests/test_fast_path.py`.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rulesched.cli import main
from rulesched.decide import reference
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call
from rulesched.rules.cel import ENGINE_NAMES, CelCompileError, Engine
from rulesched.rules.cel.analysis import PRESENT, paths, reads
from rulesched.rules.cel.rewrite import rewritten
from rulesched.rules.vocabulary import CONTEXT_NAMES
from rulesched.settings import Settings
from tests.builders import NOW, make_pod
from tests.kubeapi import wait_for
from tests.prometheus import Prometheus
from tests.recordings import record
from tests.rulebooks import LIVE, rules_dir
from tests.rules.test_guarded_metrics import book_of, contexts, guarded_rules
from tests.rules.test_metricsource import SOURCE
from tests.server import running_server

GUARDS = [
    "has(metrics) && (!has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.5)",
    "!has(metrics) || !has(metrics.custom) || !has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.5",
    "has(metrics) && has(metrics.custom) && has(node) && has(node.metadata.labels)"
    " && metrics.custom[?'cpu5m'].orValue(0.0) < 0.5",
    "cel.bind(c, metrics.custom, has(metrics) && has(pod) && (!has(c.cpu5m) || c.cpu5m < 0.5))",
    "metrics.custom.all(k, has(metrics) && metrics.custom[k] < 0.5)",
]
"""Filters that pass a node without a value and one at 0.2, and fail one at 0.95."""
SCORE = "has(metrics) && has(metrics.custom.cpu5m) ? 10.0 * (1.0 - metrics.custom.cpu5m) : 0.0"
EVERY_NAME = " && ".join(f"has({name})" for name in CONTEXT_NAMES)
REFUSED = [
    ("has(nope)", "nope", "not a context name"),
    ("[1].exists(x, has(x))", "x", "not a context name"),
    ("[1].exists(pod, has(pod))", "pod", "a local variable here"),
    ("cel.bind(node, 1, has(node))", "node", "a local variable here"),
    ("{'a': 1}.all(k, metrics, has(metrics))", "metrics", "a local variable here"),
]
"""`has()` of a name that is not (here) a context name, the name, and what the refusal says it is."""


@pytest.mark.parametrize("guard", GUARDS)
def test_each_guard_loads_and_decides_as_the_reference(tmp_path: Path, engine: Engine, guard: str) -> None:
    book = book_of(tmp_path, engine, guarded_rules([guard], [SCORE]))
    pod, nodes = make_pod(name="web"), contexts()
    call = Call(pod, nodes, now=NOW)
    fast = evaluate(prepared(book), call)
    assert fast.as_dict() == reference.evaluate(book, call).as_dict()
    assert [name for name, verdict in fast.nodes.items() if verdict.passed] == ["none", "idle"]
    assert not any(s.error for verdict in fast.nodes.values() for s in verdict.scores)


def test_every_context_name_may_be_tested_whole(engine: Engine) -> None:
    program = engine.compile(EVERY_NAME)
    assert program.result_type == "bool"
    assert rewritten(EVERY_NAME) == " && ".join(["true"] * len(CONTEXT_NAMES))


@pytest.mark.parametrize(("source", "name", "what"), REFUSED)
def test_has_of_another_name_is_refused_naming_it(engine: Engine, source: str, name: str, what: str) -> None:
    with pytest.raises(CelCompileError) as failure:
        engine.compile(source)
    assert failure.value.message.startswith(f"has({name}): has() tests whether a map or message has a field")
    assert f"{name} is {what}" in failure.value.message
    assert (failure.value.line, failure.value.column) == (1, source.index(f"has({name})") + 5)


def test_a_test_of_a_name_reads_nothing() -> None:
    """What the caches key on: `has(metrics)` is `true`, so it reads nothing of `metrics`."""
    assert reads("has(metrics) && has(pod)").names == frozenset()
    assert paths("has(metrics) && has(metrics.custom)") == {"metrics": frozenset({("custom", PRESENT)})}
    assert paths("has(node) && has(node.metadata.labels)") == {"node": frozenset({("metadata", "labels", PRESENT)})}


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
def test_check_eval_and_replay_accept_it(tmp_path: Path, engine_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    rules = rules_dir(tmp_path / "rules", LIVE)
    (rules / "source.yaml").write_text(SOURCE)
    (rules / "guarded.yaml").write_text(guarded_rules(GUARDS, [SCORE]))
    assert main(["check", str(rules), "--cel-engine", engine_name]) == 0
    # Some replayed nodes have a value above 0.5: they are replayed with the threshold of issue #23, 0.9.
    (rules / "guarded.yaml").write_text(guarded_rules([g.replace("0.5", "0.9") for g in GUARDS], [SCORE]))
    recording, _ = record(tmp_path, "names")
    capsys.readouterr()
    command = ["replay", str(recording), "--rules", str(rules), "--cel-engine", engine_name]
    assert main([*command, "--fail-on", "unschedulable>0"]) == 0
    assert "error" not in capsys.readouterr().err
    assert main(["eval", EVERY_NAME, "--cel-engine", engine_name]) == 0
    assert main(["eval", "has(metrics) && has(metrics.custom)", "--cel-engine", engine_name]) == 0
    assert capsys.readouterr().out.split() == ["true", "false"]


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
def test_check_and_eval_refuse_has_of_an_unknown_name(
    tmp_path: Path, engine_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "rules.yaml").write_text(guarded_rules(["has(metrics) && has(nope)"], []))
    assert main(["check", str(rules), "--cel-engine", engine_name]) != 0
    assert "has(nope): has() tests whether a map or message has a field" in capsys.readouterr().err
    assert main(["eval", "has(nope)", "--cel-engine", engine_name]) != 0
    assert "has(nope): " in capsys.readouterr().out


QUERY = '1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[5m]))'
NODES = ["node-a", "node-b", "node-c", "node-d", "node-e"]
POD = {"metadata": {"name": "web-1", "namespace": "default"}, "spec": {"containers": [{"name": "web"}]}}
SERVED_SOURCE = """\
apiVersion: rulesched.io/v1alpha1
kind: MetricSource
metadata: {name: prometheus}
spec:
  prometheus: {url: "URL", interval: 2s, timeout: 1s}
  queries:
  - {name: cpu5m, query: 'QUERY', nodeLabel: instance}
"""


@pytest.fixture(params=ENGINE_NAMES)
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[httpx.Client]:
    with Prometheus() as prometheus:
        # node-e's series is renamed to a node that is not a candidate: Prometheus has no value for node-e.
        prometheus.answer(QUERY, "q01-cpu-busy-by-instance", **{"node-e:9100": "node-z:9100"})
        rules = tmp_path / "rules"
        rules.mkdir()
        (rules / "source.yaml").write_text(SERVED_SOURCE.replace("URL", prometheus.url).replace("QUERY", QUERY))
        guard = "has(metrics) && has(metrics.custom) && (!has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.6)"
        (rules / "guarded.yaml").write_text(guarded_rules([guard], [SCORE]))
        nodes = tmp_path / "nodes.json"
        nodes.write_text(json.dumps({"items": [{"metadata": {"name": n}} for n in NODES]}))
        settings = Settings(rules_dir=rules, nodes_file=nodes, cluster="off", prometheus="on", cel_engine=request.param)
        with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
            yield client


def test_a_running_server_decides_with_it(client: httpx.Client) -> None:
    def passing() -> list[str]:
        names: list[str] = client.post("/filter", json={"Pod": POD, "NodeNames": NODES}).json()["NodeNames"]
        return names

    wait_for(lambda: passing() == ["node-a", "node-b", "node-c", "node-e"], timeout=20.0, what="the first poll")
