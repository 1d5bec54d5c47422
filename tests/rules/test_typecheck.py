"""Rules are type-checked at load against Kubernetes' schemas and the vocabulary's types (issue #40): a
misspelt field in every syntactic position, an operator its operands do not fit, a result of the wrong
type are refused by `rulesched check` on both engines, naming the field, the type it was looked up on and
the closest names (or the operator and the types), with the column; well-guarded rules load.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import httpx
import pytest

from rulesched.cli import main
from rulesched.rules.cel import ENGINE_NAMES, Limits, make_engine
from rulesched.rules.cel.typecheck import typed
from rulesched.rules.cel.types import DYN
from rulesched.rules.store import RuleStore
from tests.builders import rule_set, write_rules
from tests.rules.test_reload import eventually, metric, passed, reject, settings
from tests.server import running_server

FILTER = "filters:\n- name: r\n  expression: {!r}\n"
SCORE = "scores:\n- name: r\n  expression: {!r}\n"

BROKEN: list[tuple[str, str, list[str], str]] = [
    # (spec, what the error must say, at line:column)
    (
        FILTER.format("node.metadata.lables['zone'] == 'a'"),
        "field-select",
        ["undefined field 'lables' of ObjectMeta (node.metadata", "Kubernetes 1.37", "did you mean 'labels'?"],
        "1:15",
    ),
    (
        FILTER.format("!has(pod.spec.nodeSelectr)"),
        "in-has",
        ["undefined field 'nodeSelectr' of PodSpec (pod.spec", "did you mean 'nodeSelector'?"],
        "1:15",
    ),
    (
        FILTER.format("pod.spec.?nodeSelectr.orValue({}).size() == 0"),
        "optional-select",
        ["undefined field 'nodeSelectr' of PodSpec", "did you mean 'nodeSelector'?"],
        "1:11",
    ),
    (
        FILTER.format("node.spec.taints.all(t, t.efect != 'NoSchedule')"),
        "in-comprehension",
        ["undefined field 'efect' of Taint (t,", "did you mean 'effect'?"],
        "1:27",
    ),
    (
        FILTER.format("cel.bind(m, node.metadata, m.lables['zone'] == 'a')"),
        "in-bind",
        ["undefined field 'lables' of ObjectMeta (m,", "did you mean 'labels'?"],
        "1:30",
    ),
    (
        FILTER.format("namespaceObject.metadata.labls['team'] == 'a'"),
        "namespace-view",
        ["undefined field 'labls' of NamespaceViewMetadata", "did you mean 'labels'?"],
        "1:26",
    ),
    (
        SCORE.format("-metrics.cpu.usgae"),
        "metrics",
        ["undefined field 'usgae' of Usage", "did you mean 'usage'?"],
        "1:14",
    ),
    (
        "variables:\n- name: meta\n  expression: node.metadata\n" + FILTER.format("variables.meta.lables['z'] == 'a'"),
        "through-a-variable",
        ["undefined field 'lables' of ObjectMeta (variables.meta", "did you mean 'labels'?"],
        "1:16",
    ),
    (
        FILTER.format("node.status.allocatable.cpu > 4"),
        "quantity-vs-int",
        ["found no matching overload for '_>_' applied to '(string, int)'"],
        "1:29",
    ),
    (
        FILTER.format("node.metadata.labels['zone'] == 1"),
        "label-vs-int",
        ["found no matching overload for '_==_' applied to '(string, int)'"],
        "1:30",
    ),
    (
        FILTER.format("node.spec.taints.effect == 'NoSchedule'"),
        "field-of-a-list",
        ["node.spec.taints is a list(Taint), which has no field 'effect'"],
        "1:18",
    ),
    (
        SCORE.format("pod.spec.priority * 2.0"),
        "int-times-double",
        ["found no matching overload for '_*_' applied to '(int, double)'"],
        "1:19",
    ),
    (
        "matchConditions:\n- name: m\n  expression: \"pod.metadata.lables['team'] == 'a'\"\n" + FILTER.format("true"),
        "in-a-match-condition",
        ["undefined field 'lables' of ObjectMeta (pod.metadata", "did you mean 'labels'?"],
        "1:14",
    ),
    (
        "matchConditions:\n- name: m\n  expression: pod.metadata.name\n" + FILTER.format("true"),
        "match-condition-returns-string",
        ["must be a bool, not string"],
        "",
    ),
    (FILTER.format("node.metadata.name"), "filter-returns-string", ["must be a bool, not string"], ""),
    (SCORE.format("node.metadata.name"), "score-returns-string", ["must be a number, not string"], ""),
]


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize(("spec", "case", "parts", "at"), BROKEN, ids=[case for _, case, _, _ in BROKEN])
def test_check_refuses_a_rule_that_cannot_work(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    engine_name: str,
    spec: str,
    case: str,
    parts: list[str],
    at: str,
) -> None:
    write_rules(tmp_path, rule_set("typo", spec))
    assert main(["check", str(tmp_path), "--cel-engine", engine_name]) == 1
    error = capsys.readouterr().err.splitlines()[0]
    for part in parts:
        assert part in error, error
    assert error.endswith(f" at {at}") if at else " at " not in error.rsplit("'", 1)[-1], error


GUARDED = [
    "has(node.metadata.labels) && node.metadata.labels['zone'] == 'a'",
    "'zone' in node.metadata.labels && node.metadata.labels.zone == 'a'",
    "node.?metadata.?labels[?'zone'].orValue('') == 'a'",
    "node.?spec.?taints.orValue([]).all(t, t.effect != 'NoSchedule')",
    "!has(pod.spec.nodeSelector) || pod.spec.nodeSelector.all(k, k != 'x')",
    "pod.spec.containers.all(c, has(c.resources.requests) && 'cpu' in c.resources.requests)",
    "pod.spec.containers.exists(c, c.ports.exists(p, p.containerPort > 80 && p.protocol == 'TCP'))",
    "node.metadata.labels.exists(k, v, k.startsWith('zone') && v == 'a')",
    "node.metadata.labels.transformList(k, v, k + '=' + v).size() > 0",
    "quantity(node.status.allocatable.cpu).compareTo(quantity('4')) > 0",
    "quantity(node.status.allocatable.cpu).asApproximateFloat() > 4.0",
    "node.status.allocatable['nvidia.com/gpu'] == '1'",
    "metrics.cpu.usage + recent.estimates.cpu < allocatable.cpu * 0.8",
    "has(metrics.cpu) && metrics.cpu.utilization < 0.9 && metrics.age < 60.0",
    "pods.filter(p, p.metadata.labels['app'] == 'db').size() < 3 && recent.count < 5.0",
    "pods.map(p, p.requests.cpu).sum() < allocatable.cpu",
    "timestamp(pod.metadata.creationTimestamp) < now - duration('1h')",
    "pod.spec.priority > 1000 || pod.spec.priority >= 1000.5",
    "cel.bind(labels, node.metadata.labels, labels.zone == 'a')",
    "dyn(node.metadata).lables == 'a' || true",
    "namespaceObject.metadata.labels['team'] == pod.metadata.namespace",
    "pod.spec.containers[0].ports[0].containerPort == 80",
    "pod.metadata.annotations.exists(k, k.contains('x'))",
    "node.spec.taints.map(t, t.effect).exists(e, e == 'NoExecute')",
    "requests.cpu <= allocatable.cpu - allocated.cpu && estimate.cpu >= 0.0",
]


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
@pytest.mark.parametrize("expression", GUARDED)
def test_a_well_guarded_rule_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine_name: str, expression: str
) -> None:
    write_rules(tmp_path, rule_set("guarded", FILTER.format(expression)))
    status = main(["check", str(tmp_path), "--cel-engine", engine_name])
    assert status == 0, capsys.readouterr().err


NEWER = FILTER.format("pod.spec.someFutureField == 'on'")


def test_a_field_only_a_newer_kubernetes_has_is_an_error_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_rules(tmp_path, rule_set("newer", NEWER))
    assert main(["check", str(tmp_path)]) == 1
    assert "undefined field 'someFutureField' of PodSpec" in capsys.readouterr().err


def test_unknown_fields_warn_loads_it_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_rules(tmp_path, rule_set("newer", NEWER))
    assert main(["check", str(tmp_path), "--unknown-fields", "warn"]) == 0
    printed = capsys.readouterr()
    assert "ok: 1 rule set(s)" in printed.out
    [warning] = [line for line in printed.err.splitlines() if line.startswith("warning:")]
    assert "undefined field 'someFutureField' of PodSpec" in warning
    assert "read as dyn (--unknown-fields warn)" in warning


def test_unknown_fields_warn_does_not_excuse_a_typo_in_rulescheds_own_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_rules(tmp_path, rule_set("typo", SCORE.format("metrics.cpu.usgae")))
    assert main(["check", str(tmp_path), "--unknown-fields", "warn"]) == 1
    assert "undefined field 'usgae' of Usage" in capsys.readouterr().err


def test_eval_refuses_a_misspelt_field_as_a_compile_error(capsys: pytest.CaptureFixture[str]) -> None:
    main(["eval", "node.metadata.lables['zone'] == 'a'", "--output", "json"])
    answer = capsys.readouterr().out
    assert '"kind": "compile"' in answer
    assert "did you mean 'labels'?" in answer
    assert "(at 1:15)" in answer


RELOADED = {
    "field-select",
    "in-has",
    "optional-select",
    "in-comprehension",
    "in-bind",
    "quantity-vs-int",
    "label-vs-int",
    "filter-returns-string",
    "score-returns-string",
}
"""The issue's cases, dropped one by one into a running server's rules directory."""


def rejected(client: httpx.Client, count: int) -> bool:
    return metric(client, 'rulesched_reloads_total{result="rejected"}') == count


def test_a_running_server_keeps_its_rules_when_a_reload_brings_a_rule_that_cannot_work(tmp_path: Path) -> None:
    """Each broken file dropped into the rules directory of a running server is rejected, named in /rules,
    and the last good rules stay active."""
    write_rules(tmp_path, reject("good", "k8s-node1"), "good.yaml")
    with running_server(settings(tmp_path)) as url, httpx.Client(base_url=url, timeout=10) as client:
        dropped = [(spec, parts) for spec, case, parts, _ in BROKEN if case in RELOADED]
        assert len(dropped) == len(RELOADED)
        for count, (spec, parts) in enumerate(dropped, start=1):
            write_rules(tmp_path, rule_set("typo", spec), "typo.yaml")
            eventually(functools.partial(rejected, client, count))
            status = client.get("/rules").json()
            assert status["active"]["generation"] == 1
            [error] = status["lastRejected"]["errors"]
            assert error["file"].endswith("typo.yaml")
            assert all(part in error["message"] for part in parts), error["message"]
            assert passed(client) == ["k8s-master", "k8s-node2"]


def test_an_expression_nested_past_the_limit_is_left_to_the_engine() -> None:
    assert typed("pod" + ".a" * 2000, {}).type == DYN


def test_a_reload_with_unknown_fields_warn_loads_and_logs_each_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_rules(tmp_path, rule_set("newer", NEWER))
    store = RuleStore([tmp_path], make_engine("cpp", Limits(unknown_fields="warn")))
    with caplog.at_level(logging.WARNING, logger="rulesched.rules"):
        assert store.reload() == "loaded"
    assert store.book is not None
    [warning] = store.book.warnings
    assert warning.rule == "r"
    assert warning.position == (1, 10)
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "undefined field 'someFutureField' of PodSpec" in record.getMessage()


def test_the_servers_unknown_fields_setting_reaches_the_check(tmp_path: Path) -> None:
    write_rules(tmp_path, rule_set("newer", NEWER))
    warn = settings(tmp_path).model_copy(update={"unknown_fields": "warn"})
    with running_server(warn) as url, httpx.Client(base_url=url, timeout=10) as client:
        status = client.get("/rules").json()
        assert [rule_set["name"] for rule_set in status["active"]["ruleSets"]] == ["newer"]
