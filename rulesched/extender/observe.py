"""What the extender tells about itself: the decision log line per filter and prioritize call."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rulesched.extender.wire import pod_identity
from rulesched.rules.decision import Decision

log = logging.getLogger("rulesched.decision")


class Observer:
    """Receives every decision; logs it (and, with metrics enabled, counts it)."""

    def decision(self, verb: str, pod: Mapping[str, Any], decision: Decision, candidates: int, seconds: float) -> None:
        rejections = Counter(
            f"{f.rule_set}/{f.rule}"
            for n in decision.nodes.values()
            for f in n.filters
            if f.enforce and f.outcome != "pass"
        )
        top = [{"node": n.name, "score": n.score} for n in decision.ranking()[:3]] if verb != "filter" else []
        log.info(
            "%s %s/%s: %d of %d nodes passed",
            verb,
            pod_identity(pod)["namespace"],
            pod_identity(pod)["name"],
            len(decision.passed),
            candidates,
            extra={
                "decision": {
                    "pod": pod_identity(pod),
                    "verb": verb,
                    "candidates": candidates,
                    "passed": len(decision.passed),
                    "rejections": dict(rejections),
                    "top": top,
                    "generation": decision.generation,
                    "durationMs": round(seconds * 1000, 3),
                }
            },
        )
