"""`rulesched tune`: the weights' search (search.py) over a scene (scene.py) placed by a model of the
placement (model.py) with kube-scheduler's own plugins (kube.py), the scheduler configuration it reads
(config.py), its report (report.py) and the rule files it writes (write.py)."""
