"""`rulesched test`: RuleTest files, their model (model.py), loading (load.py), what each case expects
(expect.py), the run (run.py) and its report (report.py)."""
