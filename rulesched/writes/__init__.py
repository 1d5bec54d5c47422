"""Every write rulesched makes to the Kubernetes API, one small module per verb: `bind` (a pod's Binding,
`--enable-bind`), `evict` (an Eviction and its Event, `--deschedule on`), `lease` (the coordination.k8s.io
Lease among replicas), `nudge` (the requeue annotation's patch, `--requeue`).

Only these modules call a write verb of the kubernetes client (`tests/test_architecture.py` fails on one
anywhere else); each turns every answer of the API into data its caller reads (an outcome, a reason), never
an exception. What decides a write lives in the controllers (`rulesched/controllers/`); what a write needs
granted is in its overlay (`deploy/overlays/`).
"""
