"""The pods' usage and the estimates drawn from it: the usage store (store.py), fed by metrics-server's pod
metrics (pod_metrics.py, read by pod_metrics_wire.py) or a MetricSource's `podUsage` (prometheus_pods.py),
and put together as the settings say (estimates.py)."""
