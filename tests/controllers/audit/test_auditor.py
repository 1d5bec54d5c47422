"""The continuous audit's pace and bounds (issue #26), stepped by hand over file sources."""

from __future__ import annotations

from pathlib import Path

from rulesched.cluster.pods.index import FilePodSource
from rulesched.cluster.sources import FileNodeSource
from rulesched.controllers.audit.auditor import Auditor, AuditPace, AuditSources
from rulesched.decide.fast import prepared
from rulesched.rules.cel import make_engine
from rulesched.rules.store import RuleStore
from tests.audit_inputs import write_inputs


def auditor(tmp_path: Path, pace: AuditPace) -> Auditor:
    paths = write_inputs(tmp_path)
    store = RuleStore([paths["rules"]], make_engine("cpp"))
    store.reload()
    return Auditor(store, AuditSources(FileNodeSource(paths["nodes"]), FilePodSource(paths["pods"])), pace)


def test_a_step_audits_at_most_its_nodes_and_a_pass_ends_complete(tmp_path: Path) -> None:
    audit = auditor(tmp_path, AuditPace(nodes_per_step=1))
    audit.step()
    assert ({v.node for v in audit.violations()}, audit.age()) == ({"a"}, None)
    audit.step()
    assert {v.node for v in audit.violations()} == {"a", "b"}
    age = audit.age()
    assert age is not None
    assert age < 1.0


def test_violations_beyond_the_bound_are_left_out_and_said(tmp_path: Path) -> None:
    audit = auditor(tmp_path, AuditPace(max_violations=2))
    audit.step()
    assert len(audit.violations()) == 2
    assert audit.overflowed


def test_without_rules_nothing_is_audited(tmp_path: Path) -> None:
    paths = write_inputs(tmp_path)
    sources = AuditSources(FileNodeSource(paths["nodes"]), FilePodSource(paths["pods"]))
    audit = Auditor(RuleStore([paths["rules"]], make_engine("cpp")), sources)
    assert audit.step() == "ok"
    assert (audit.violations(), audit.age(), audit.generation()) == ([], None, 0)


def test_the_audit_evaluates_with_a_plan_of_its_own(tmp_path: Path) -> None:
    audit = auditor(tmp_path, AuditPace())
    audit.step()
    live = audit.store.book
    assert audit.book is not None
    assert live is not None
    assert audit.book.rule_sets is live.rule_sets
    assert prepared(audit.book) is not prepared(live), (
        "the request path's caches are never touched by the audit's thread"
    )
    assert not prepared(live).caches.memo_of
