"""What the subcommands share: how a usage error is printed."""

from __future__ import annotations

import sys


def fail(message: str, status: int = 1) -> int:
    """Print `rulesched: message` on standard error; return `status`."""
    print(f"rulesched: {message}", file=sys.stderr)
    return status
