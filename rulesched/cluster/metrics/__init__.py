"""The nodes' metrics: metrics-server's node samples (metrics_server.py), and the Prometheus queries of the
MetricSources (prometheus.py, their health in prometheus_status.py) into `metrics.custom` (custom.py)."""
