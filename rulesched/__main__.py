"""`python -m rulesched`: the same as the `rulesched` command."""

from rulesched.cli import entrypoint

entrypoint()
