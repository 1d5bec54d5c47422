"""Tests of `rulesched.controllers.shadow`: the shadow rules over a real server, their pace, collector and summary."""
