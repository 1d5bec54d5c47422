"""`rulesched replay`: a recording's calls decided again by new rules (impact.py), the impact report
(report.py, markdown.py) and RuleTest cases written from the recording (ruletest.py)."""
