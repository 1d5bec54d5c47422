"""How much an evaluation may compute where it runs (`within`, `work`): estimated from the rules' costs, so that a
call the caches answer, or one needing little work, is answered on the event loop (`--loop-work`).
"""

from __future__ import annotations

import math
import threading


class NeedsEvaluationError(Exception):
    """Raised under `within()` where an evaluation would compute more than it may (`within(0)`: anything but a
    lookup in the caches)."""


WORK_EVALUATION = 20.0
"""Estimated microseconds of one CEL evaluation of a cheap expression, its bindings made (measured: 5-15)."""

WORK_COST = 0.02
"""Estimated microseconds per unit of an expression's estimated worst-case cost (docs/rules/cost.md)."""

WORK_NODE = 1.0
"""Estimated microseconds of Python per candidate whose verdict is made or kept (measured: about 0.5)."""

WORK_POD = 50.0
"""Estimated microseconds to convert a pod's values for the engine (measured: 10-30 for a trimmed pod)."""

WORK_MEMO = 80.0
"""Estimated microseconds to make a node's memo: its values converted for the engine (measured: about 40),
before its node-only rules run."""

WORK_PROJECTION = 10.0
"""Estimated microseconds to make a node's projection for a per-pod rule (measured: about 5)."""

WORK_BIND = 500.0
"""Estimated microseconds to compile a program bound to a pod's values (measured: about 400)."""


def evaluation_work(cost: int) -> float:
    """The estimated microseconds of one evaluation of an expression of estimated worst-case `cost`."""
    return WORK_EVALUATION + cost * WORK_COST


class _Mode(threading.local):
    budget: float | None = None
    """Estimated microseconds of work evaluations may still do, in `within()`; None: no bound."""


_mode = _Mode()


class within:  # noqa: N801  (used as a function: `with within(budget):`)
    """Evaluations in this block may compute about `budget` microseconds of estimated work (`work`), from the
    rules' estimated costs: before a step that would go past it they raise `NeedsEvaluationError`, so that
    what they kept in the caches is only complete results. The extender evaluates a call within its
    `--loop-work` on its event loop, and runs the others in its evaluation thread. (A class, not a
    generator: entered on every call the extender answers.)"""

    __slots__ = ("budget",)

    def __init__(self, budget: float) -> None:
        self.budget = budget

    def __enter__(self) -> None:
        _mode.budget = self.budget

    def __exit__(self, *failure: object) -> None:
        _mode.budget = None


def work(estimate: float = math.inf) -> None:
    """Called where an evaluation is about to compute about `estimate` microseconds (unknown: infinite);
    raises within a budget it would go past."""
    budget = _mode.budget
    if budget is not None:
        if estimate > budget:
            raise NeedsEvaluationError
        _mode.budget = budget - estimate
