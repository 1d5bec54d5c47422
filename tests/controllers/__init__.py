"""Tests of `rulesched.controllers`: each controller over a real server and in process."""
