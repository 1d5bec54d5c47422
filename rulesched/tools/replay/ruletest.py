"""From a recorded decision to a RuleTest: an incident ("why did this pod land there?") becomes a test.

`rulesched replay RECORDING --to-ruletest NAMESPACE/NAME --rules RULES --out DIR` takes the pod's last
recorded filter call, and the prioritize call that followed it when it ranked exactly the nodes that
passed, and writes `DIR/<name>.yaml` with its fixtures in `DIR/fixtures/`: the nodes, their metrics and
the pods on them as the decision saw them, the pod, its namespace, and `now`. The expectations are the
recorded decision (feasible nodes, each rejection's reason, the final scores and the best node); edit
them into what the rules *should* decide, and the test guards it from then on.

What a RuleTest snapshot cannot hold is left out and said: a node's `recent` placements (a file pod
source has none) and `metrics.age` (a metrics file is taken as current).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rulesched.recording_format import DecisionKeys
from rulesched.rules.context import NodeContext
from rulesched.rules.pod_values import pod_identity
from rulesched.tools.recording_read import Call, Recording, read_calls


class RuleTestError(Exception):
    """The pod is not in the recording, or the files cannot be written."""


def find_calls(recording: Recording, pod: str) -> tuple[Call, Call | None]:
    """The pod's last filter call, and the prioritize call after it (None when there is none)."""
    last: Call | None = None
    after: Call | None = None
    seen: list[str] = []
    for call in read_calls(recording):
        identity = pod_identity(call.pod)
        name = f"{identity['namespace']}/{identity['name']}"
        if name != pod:
            if len(seen) < 10 and name not in seen:
                seen.append(name)
            continue
        if call.verb == "filter":
            last, after = call, None
        elif call.verb == "prioritize" and last is not None and after is None:
            after = call
    if last is None:
        raise RuleTestError(f"{recording.path}: no filter call of pod {pod} (pods in it: {', '.join(seen) or 'none'})")
    return last, after


def _quantity(resource: str, value: float) -> str:
    if resource == "cpu":
        return f"{round(value * 1e9)}n"
    return str(int(value)) if float(value).is_integer() else repr(value)


def _pod_from_view(view: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod whose trimmed view and requests are `view`'s (one container holding the requests)."""
    requests = {k: _quantity(k, v) for k, v in (view.get("requests") or {}).items()}
    spec = dict(view.get("spec") or {}) | {"containers": [{"name": "recorded", "resources": {"requests": requests}}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": view.get("metadata") or {}, "spec": spec,
            "status": {"phase": "Running"}}  # fmt: skip


def _metrics_item(context: NodeContext) -> dict[str, Any] | None:
    usage = {}
    for resource in ("cpu", "memory"):
        entry = context.metrics.get(resource)
        if isinstance(entry, Mapping) and "usage" in entry:
            usage[resource] = _quantity(resource, entry["usage"])
    return {"metadata": {"name": context.name}, "usage": usage} if usage else None


def fixtures(call: Call) -> dict[str, Any]:
    """The snapshot files of a call: NodeList, NodeMetricsList, PodList, NamespaceList (if known), the Pod."""
    metrics = [m for m in map(_metrics_item, call.contexts) if m is not None]
    pods = [_pod_from_view(v) for c in call.contexts for v in c.pods.pods]
    found = {
        "nodes": {"apiVersion": "v1", "kind": "NodeList", "items": [dict(c.node) for c in call.contexts]},
        "metrics": {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetricsList", "items": metrics},
        "pods": {"apiVersion": "v1", "kind": "PodList", "items": pods},
        "pod": dict(call.pod),
    }
    if call.namespace is not None:
        found["namespaces"] = {"apiVersion": "v1", "kind": "NamespaceList", "items": [dict(call.namespace)]}
    return found


def expectations(filtered: Call, prioritized: Call | None) -> dict[str, Any]:
    """The recorded decision as a RuleTest `expect`: scores only when the prioritize call ranked exactly
    the nodes that passed, on the same snapshot (a RuleTest scores the passing nodes)."""
    decision = filtered.decision
    expect: dict[str, Any] = {"feasible": list(decision.get(DecisionKeys.PASSED) or [])}
    expect["rejected"] = dict(decision.get(DecisionKeys.REJECTED) or {})
    if prioritized is not None and _same_snapshot(filtered, prioritized):
        scores = dict(prioritized.decision.get(DecisionKeys.SCORES) or {})
        expect["scores"] = scores
        if scores:
            expect["best"] = min(scores.items(), key=lambda item: (-item[1], item[0]))[0]
    return expect


def _same_snapshot(filtered: Call, prioritized: Call) -> bool:
    seen = {c.name: c.key for c in filtered.contexts}
    passed = set(filtered.decision.get(DecisionKeys.PASSED) or [])
    return {c.name for c in prioritized.contexts} == passed and all(
        seen.get(c.name) == c.key for c in prioritized.contexts
    )


def write_ruletest(recording: Recording, pod: str, rules: Sequence[Path], out: Path) -> Path:
    """Write the RuleTest of the pod's recorded decision into `out`; its path."""
    filtered, prioritized = find_calls(recording, pod)
    files = fixtures(filtered)
    name = pod_identity(filtered.pod)["name"] or "pod"
    try:
        (out / "fixtures").mkdir(parents=True, exist_ok=True)
        for kind, document in files.items():
            (out / "fixtures" / f"{name}-{kind}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    except OSError as error:
        raise RuleTestError(f"{out}: cannot write the RuleTest: {error}") from error
    spec: dict[str, Any] = {"rules": [os.path.relpath(Path(r).resolve(), out.resolve()) for r in rules]}
    spec |= {
        kind: f"fixtures/{name}-{kind}.yaml" for kind in ("nodes", "metrics", "pods", "namespaces") if kind in files
    }
    case = {
        "name": f"{pod} as decided at {filtered.now.isoformat()}",
        "pod": f"fixtures/{name}-pod.yaml",
        "now": filtered.now.isoformat(),
        "expect": expectations(filtered, prioritized),
    }
    if filtered.estimate is not None:  # the pod's estimate the live rules saw
        case = {**{k: v for k, v in case.items() if k != "expect"}, "estimate": dict(filtered.estimate)} | {
            "expect": case["expect"]
        }
    document = {
        "apiVersion": "rulesched.io/v1alpha1",
        "kind": "RuleTest",
        "metadata": {"name": f"recorded-{name}"},
        "spec": spec | {"cases": [case]},
    }
    path = out / f"{name}.yaml"
    path.write_text(_HEADER.format(recording=recording.path) + yaml.safe_dump(document, sort_keys=False))
    _warn_about_what_is_left_out(filtered)
    return path


_HEADER = """\
# A recorded decision as a RuleTest (rulesched replay {recording} --to-ruletest): the expectations are
# what the rules decided then. Edit them into what they should decide, and keep the test.
"""


def _warn_about_what_is_left_out(call: Call) -> None:
    recent = [c.name for c in call.contexts if float((c.pods.recent or {}).get("count", 0) or 0) > 0]
    if recent:
        print(f"note: recent placements on {', '.join(recent)} are not in the RuleTest snapshot", file=sys.stderr)
    if any("age" in c.metrics for c in call.contexts):
        print("note: metrics.age is not in the RuleTest snapshot (a metrics file is taken as current)", file=sys.stderr)
