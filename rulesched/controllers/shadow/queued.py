"""An answered call as it waits for its comparison (`Queued`): the shadow book's `Call` of it (`shadow_call`: what
the live decision saw) and the live decision's outcome (`Live`), not the request."""

from __future__ import annotations

from dataclasses import dataclass

from rulesched.controllers.shadow.summary import Live
from rulesched.decide.verbs import Call, Verb
from rulesched.handoff.answered import Answered


@dataclass(slots=True)
class Queued:
    """An answered call waiting for its comparison: what the live decision saw, as the shadow book's `Call`, and
    what it decided."""

    call: Call
    live: Live
    warmed: int = 0
    """How many of its nodes were made ready for the shadow book in earlier slices (`Shadow._warm`)."""


def shadow_call(answered: Answered) -> Call:
    """The shadow book's call of an answered one: what the live decision saw (the same pod, `now`, namespace,
    estimate and node contexts; distinct, as the live call checked)."""
    return Call(
        answered.pod, answered.contexts, Verb.named(answered.verb), answered.now, None, answered.namespace, True,
        None, answered.estimate,
    )  # fmt: skip
