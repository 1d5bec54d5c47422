"""The audit controller's entry point: `build_auditor` makes the continuous audit, and the descheduler the
settings ask for, over the server's sources."""

from __future__ import annotations

from rulesched.cluster import Cluster
from rulesched.controllers.audit.auditor import Auditor, AuditPace, AuditSources
from rulesched.controllers.audit.descheduler import build_descheduler
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings


def build_auditor(settings: Settings, store: RuleStore, cluster: Cluster) -> Auditor | None:
    """The continuous audit over the server's sources; None without a node source and a pod source."""
    if cluster.nodes is None or cluster.pods is None:
        return None
    sources = AuditSources(
        cluster.nodes, cluster.pods, cluster.metrics, cluster.namespaces, cluster.custom, cluster.placements
    )
    pace = AuditPace(settings.audit_interval, settings.audit_nodes_per_step, settings.audit_max_violations)
    auditor = Auditor(store, sources, pace)
    auditor.descheduler = build_descheduler(settings, cluster.access)
    return auditor
