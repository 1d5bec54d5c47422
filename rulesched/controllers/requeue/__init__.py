"""The requeue controller (`--requeue`): a pod this replica rejected is evaluated again when an input changes,
and kube-scheduler is nudged to retry it the moment a rule would let it through (docs/operations/requeue.md).

Entry point: `controller.Requeue`, built and started by the server (`extender/server.py`: `start()` for the
nudge thread, `run()` as an event-loop task), and handed each filter answer (`after_filter`).
It reads: the filter answers with no passing node, the rule store's generation and the cluster sources' change
logs (nodes, pods, metrics, Prometheus values), and evaluates through the server's own evaluation (`Passing`).
It writes: the `rulesched.io/requeue` annotation of a pending pod (`writes/nudge.py`), from its nudge thread
(`nudger.py`), paced and bounded. Its surface: the `rulesched_requeue_*` metrics (`metrics.py`) and the
`requeue` section of GET /rules (`Requeue.status`). Its memory of the rejected pods: `memory.py`.
"""
