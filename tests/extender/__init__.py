"""Tests of `rulesched.extender`: the HTTP edge over a real server, the wire, what follows an answer."""
