"""The audit controller: running pods audited against the rules in force, and descheduling
(docs/guides/descheduling.md).

Entry point: `controller.build_auditor`, called by the server (`extender/server.py`), which starts the
`Auditor` (`auditor.py`: a background loop of its own) and installs its surface (`http.install`: GET /audit,
the `rulesched_audit_*` and `rulesched_evictions` metrics).
It reads: the rule store, and the cluster sources (nodes, pods, metrics, namespaces, Prometheus values, the
pods' placement views), each step only the nodes whose generations changed; the evaluation of one node is
`audit.py`'s, shared with `rulesched audit`.
It writes, with `--deschedule on` and while this replica holds the lease (`writes/lease.py`): evictions and their
Events (`writes/evict.py`), decided by the descheduler (`descheduler.py`, its policy and exclusions in
`deschedule_policy.py`, its anti-loop checks in `deschedule_checks.py`).
"""
