"""Tests of `rulesched.rules`: the rule language, its loading, the CEL adapter and the context names."""
