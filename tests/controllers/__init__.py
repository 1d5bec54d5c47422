"""Tests of `rulesched.controllers`: each controller against the loopback API and a real server."""
