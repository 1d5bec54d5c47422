"""The fast path: `evaluate(prepared(book), call)` gives the reference's Decision from caches kept per rule
book (`prepared`), one lookup per candidate when they hold the answer.
"""

from __future__ import annotations

from rulesched.decide.fast.engine import evaluate, warm
from rulesched.decide.fast.prepared import prepared

__all__ = ["evaluate", "prepared", "warm"]
