"""The request path as a pipeline (docs/architecture.md, "A request"), enforced: `Extender` holds the state the
verbs share and takes no step of a request, and no verb returns to it twice for the same thing."""

from __future__ import annotations

import ast
from collections import Counter

from tests.paths import REPO

EXTENDER = REPO / "rulesched" / "extender"

REQUEST_NAMES = ("request", "body", "args", "contexts", "victims", "decision", "answered", "found")
REQUEST_TYPES = ("Request", "bytes", "wire.", "ExtenderArgs", "NodeContext", "Decision", "Answered")
"""What only a request's own steps take: its HTTP request, its body, its parsed args, its node contexts, its
decision, the call handed on. `Extender` may offer lookups in the caches it holds (a pod's namespace and
estimate), and the evaluation thread a `Call` runs in, but no step of its own."""


def methods(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods of the `Extender` class in `source`."""
    (state,) = [node for node in ast.parse(source).body if isinstance(node, ast.ClassDef) and node.name == "Extender"]
    return [node for node in state.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def steps_in(source: str) -> list[str]:
    """The methods of the `Extender` class in `source` that take a request's own input (by name or by type)."""
    found = []
    for method in methods(source):
        arguments = method.args
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            annotation = ast.unparse(argument.annotation) if argument.annotation is not None else ""
            if argument.arg in REQUEST_NAMES or any(name in annotation for name in REQUEST_TYPES):
                found.append(method.name)
                break
    return found


def returns_in(source: str, offers: set[str]) -> dict[str, list[str]]:
    """Each function of `source` that calls one of `Extender`'s methods (`offers`, on `extender`) more than once,
    with those methods."""
    found = {}
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        calls = Counter(
            node.func.attr
            for node in ast.walk(function)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "extender"
            and node.func.attr in offers
        )
        again = sorted(name for name, count in calls.items() if count > 1)
        if again:
            found[function.name] = again
    return found


def test_the_shared_state_takes_no_step_of_a_request() -> None:
    assert steps_in((EXTENDER / "state.py").read_text()) == []


def test_no_verb_returns_to_the_shared_state_twice_for_the_same_thing() -> None:
    offers = {method.name for method in methods((EXTENDER / "state.py").read_text())}
    assert returns_in((EXTENDER / "routes.py").read_text(), offers) == {}


HUB = """
class Extender:
    def body(self, request: Request) -> bytes: ...
    def args(self, body: bytes) -> wire.ExtenderArgs: ...
    async def candidates(self, parsed: wire.ExtenderArgs) -> list[NodeContext]: ...
    def reserve(self, pod: Mapping[str, Any], decision: Decision) -> None: ...
    def namespace(self, pod: Mapping[str, Any]) -> Namespace | None: ...
    def book(self) -> RuleBook: ...

async def explain_verb(extender: Extender, request: Request) -> Response:
    book = extender.book()
    call = Call(pod, extender.namespace(pod))
    return report(extender.namespace(pod))
"""
"""The shape these tests refuse: the steps of a request on the shared state, and a verb going back to it."""


def test_the_checks_see_a_step_on_the_shared_state_and_a_verb_returning_to_it() -> None:
    assert steps_in(HUB) == ["body", "args", "candidates", "reserve"]
    assert returns_in(HUB, {method.name for method in methods(HUB)}) == {"explain_verb": ["namespace"]}
