"""Tests of `rulesched.cli`: the `rulesched` command, run as a function and as a process."""
