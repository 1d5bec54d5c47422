"""Tests of `rulesched.tools`: the rule authors' commands (RuleTest, replay, scheduler configuration, lint)."""
