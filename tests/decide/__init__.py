"""Tests of `rulesched.decide`: the Decision, the reference evaluation and the fast path held to it."""
