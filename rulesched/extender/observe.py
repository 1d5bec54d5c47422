"""What the extender tells about each decision: one log line per filter and prioritize call, and metrics.

The decision line carries the pod, the verb, how many candidates and how many passed, rejections
counted by rule, the top three nodes with their scores, the rule book generation and the duration.
Per-node details (each rule's outcome and score) are logged at debug level.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rulesched.decide.decision import Decision
from rulesched.extender.logformat import direct_info
from rulesched.extender.metrics import Metrics
from rulesched.rules.pod_values import pod_identity

log = logging.getLogger("rulesched.decision")


class Observer:
    """Receives every decision; logs it and counts it."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics or Metrics()

    def decision(
        self,
        verb: str,
        pod: Mapping[str, Any],
        decision: Decision,
        candidates: int,
        seconds: float,
        passed: int | None = None,
    ) -> None:
        """Log and count `decision`; `passed` is how many nodes passed, when the caller has counted them."""
        failures = decision.failures()
        self.metrics.decision(verb, decision, candidates, failures)
        if not log.isEnabledFor(logging.INFO):
            return
        identity = pod_identity(pod)
        rejections = {f"{rule_set}/{rule}": n for (rule_set, rule, enforce), n in failures.items() if enforce}
        top = [{"node": name, "score": score} for name, score in decision.top(3)] if verb != "filter" else []
        if passed is None:
            passed = len(decision.passed)
        fields = {
            "pod": identity,
            "verb": verb,
            "candidates": candidates,
            "passed": passed,
            "rejections": rejections,
            "top": top,
            "generation": decision.generation,
            "durationMs": round(seconds * 1000, 3),
        }
        if decision.errors:
            fields["ruleErrors"] = rule_errors(decision)
        if decision.deadline_exceeded:
            fields["deadlineExceeded"] = True
        message = "%s %s/%s: %d of %d nodes passed" + (" (deadline exceeded)" if decision.deadline_exceeded else "")
        arguments = (verb, identity["namespace"], identity["name"], passed, candidates)
        direct = direct_info(log)
        if direct is not None:
            direct(message % arguments, fields)
        else:
            log.info(message, *arguments, extra=fields)
        if log.isEnabledFor(logging.DEBUG):
            for node in decision.nodes.values():
                log.debug("%s %s on %s", verb, identity["name"], node.name, extra={"node": node.as_dict()})


def rule_errors(decision: Decision) -> dict[str, dict[str, Any]]:
    """The decision's evaluation errors by rule: how many nodes, and the first error's text (cut short)."""
    found: dict[str, dict[str, Any]] = {}
    for error in decision.errors:
        entry = found.setdefault(f"{error.rule_set}/{error.rule}", {"nodes": 0, "error": error.error[:300]})
        entry["nodes"] += 1
    return found
