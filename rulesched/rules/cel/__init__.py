"""The CEL adapter: one small interface over two engines.

`cpp` is cel-expr-python (Google's C++ runtime, fast, the default); `celpy` is cel-python (pure
Python, the portable reference). The interface both implement is `base.py`; this package names it and
composes the engines (`make_engine`), importing an engine's module only when it is chosen, so that no
engine module imports this one back.
"""

from __future__ import annotations

from rulesched.rules.cel.base import (
    DEADLINE_MESSAGE,
    ENGINE_NAMES,
    CelCompileError,
    CelCostError,
    CelEvalError,
    Engine,
    EngineName,
    Expiry,
    Limits,
    Program,
    VariableSource,
    deadline,
    past_deadline,
)

__all__ = [
    "DEADLINE_MESSAGE",
    "ENGINE_NAMES",
    "CelCompileError",
    "CelCostError",
    "CelEvalError",
    "Engine",
    "EngineName",
    "Expiry",
    "Limits",
    "Program",
    "VariableSource",
    "deadline",
    "make_engine",
    "past_deadline",
]


def make_engine(name: EngineName, limits: Limits | None = None, *, activation_evaluations: int | None = None) -> Engine:
    """The engine called `name`; its library is imported only when it is chosen. `activation_evaluations`:
    the cpp engine's renewal of kept activations (`Settings.cel_activation_evaluations`)."""
    engine: Engine
    if name == "cpp":
        from rulesched.rules.cel.cpp import CppEngine

        engine = CppEngine() if activation_evaluations is None else CppEngine(activation_evaluations)
    elif name == "celpy":
        from rulesched.rules.cel.celpy_engine import CelpyEngine

        # cel-cpp's type checker gives each expression its result type, which celpy does not compute.
        engine = CelpyEngine(checker=make_engine("cpp"))
    else:
        raise ValueError(f"unknown CEL engine {name!r}: choose one of {', '.join(ENGINE_NAMES)}")
    if limits is not None:
        engine.limits = limits
    return engine
