"""The hand-on step of filter and prioritize: what an answered call is handed on to, each a target the shared
state (`Extender`) holds. The reload canary is told of a filter call's pod at once (`--reload-canary`); the rest
runs once the answer is sent (the steps `after.NoCollection` is given): requeue learns whether any node passed
(`--requeue`), the pod is counted on the node a prioritize call ranked first (`reserve`), and the shadow book and
the recording get the call as it was decided (`answered`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from rulesched.cluster.pods.index import PodSource
from rulesched.decide.decision import Decision
from rulesched.extender import wire
from rulesched.extender.state import Extender
from rulesched.handoff.answered import Answered
from rulesched.rules.context import NodeContext

Step = Callable[[], None]
"""A step run once the answer is sent."""


def after_filter(
    extender: Extender, args: wire.ExtenderArgs, contexts: Sequence[NodeContext], passed: int
) -> Step | None:
    """A filter call's pod told to the reload canary now; requeue's step (is the pod to be retried later?)."""
    if extender.recent is not None:
        extender.recent.seen(args.pod, contexts)
    requeue = extender.requeue
    return requeue.after_filter(args.pod, args.names, passed > 0) if requeue is not None else None


def after_prioritize(
    extender: Extender, args: wire.ExtenderArgs, unknown: Mapping[str, str], decision: Decision
) -> Step | None:
    """A names-mode prioritize call kept for `--refresh-ahead` to evaluate again; the step that counts the pod on
    the node ranked first once the answer is sent (before any other call is read: the event loop does nothing
    between)."""
    if args.node_names is not None and not unknown:
        extender.last_prioritize = (args.pod, args.node_names)
    pods = extender.cluster.pods
    return functools.partial(reserve, pods, args.pod, decision) if pods else None


def reserve(pods: PodSource, pod: Mapping[str, Any], decision: Decision) -> None:
    """Count the pod on the node this extender ranked first of the `decision`'s candidates, when one node
    alone has the top score (with ties, kube-scheduler's own scores decide: the pod is counted when /bind
    names its node), until the pod watch shows where it went."""
    scores = decision.scores()
    if not scores:
        return
    # Every prioritize call pays for this over all its candidates: C-level passes only (a loop in
    # Python cost as much as the rest of a 1000-candidate call's own Python work).
    best = max(scores)
    if scores.count(best) == 1:
        pods.reserve(pod, decision.names[scores.index(best)])
    else:
        pods.ranked(pod)


def answered(extender: Extender, call: Answered) -> Step:
    """The step that hands the call on to the shadow book and the recording (when `Extender.handing_on`), with
    the pod's `estimate` found once the answer is sent when the rules read none (`call.estimate` None)."""

    def hand_on() -> None:
        seen = call if call.estimate is not None else replace(call, estimate=_estimate_handed_on(extender, call.pod))
        submit(extender, seen)

    return hand_on


def _estimate_handed_on(extender: Extender, pod: Mapping[str, Any]) -> Mapping[str, float] | None:
    """The pod's `estimate` for what the call is handed on to, when that needs it (the live rules read none):
    the recording keeps every input of the call; the shadow book only when its rules read it. Else None:
    finding it costs tens of microseconds, after each answer, before the next call is read."""
    if extender.recorder is not None:
        return extender.estimate(pod)
    shadow_book = extender.shadow.store.book if extender.shadow is not None else None
    return extender.estimate_for(shadow_book, pod) if shadow_book is not None else None


def submit(extender: Extender, call: Answered) -> None:
    """After the answer was sent: queue the call for the shadow book and the recording (both bounded)."""
    if extender.shadow is not None:
        extender.shadow.submit(call)
    if extender.recorder is not None:
        extender.recorder.submit(call)
