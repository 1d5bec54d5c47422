"""Tests of `rulesched.writes`: each write against the loopback API, its refusals included."""
