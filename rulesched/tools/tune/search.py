"""`rulesched tune`: the score weights and the extender's weight that serve an objective, found by placing a
scene's pods again and again (`model.simulate`) with other weights.

The search is bounded (`Search.trials` weight sets, each placed with `Search.seeds` seeds, within
`Search.max_seconds`: the weight sets tried so far when time runs out), deterministic for a seed, and honest:
each weight set is placed with several seeds (other poll phases, ties and +-10% of each pod's use), the
spread of its figures over those seeds is its noise, and the best is proposed only when it beats the
current weights by more than the larger of the two spreads, and does no worse than them once the held-out
half of the arrivals is placed too (tuned on the first half; every arrival placed to check). Memory: one
scene, one simulation at a time and a few numbers per weight set tried.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rulesched.rules.book import RuleBook
from rulesched.tools.tune.model import Outcome, Scene, Weights, simulate

OBJECTIVES = ("balance", "pack")
RULE_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
"""The rule weights tried (a score's weight is relative to the others of the rule book)."""
EXTENDER_GRID = (1, 2, 3, 5, 10, 20, 50)
"""The extender weights tried (kube-scheduler takes a positive integer)."""


@dataclass(frozen=True, slots=True)
class Search:
    """How to search: the objective, how many weight sets and seeds, for how long, from which seed."""

    objective: str = "balance"
    trials: int = 40
    seeds: int = 3
    max_seconds: float = 120.0
    seed: int = 1
    threshold: float = 0.8
    """pack: the share of its allocatable CPU no node may use."""
    holdout: bool = True
    """Tune on the first half of the arrivals and check with all of them (when there are at least 4)."""


@dataclass(slots=True)
class Trial:
    """One weight set placed with every seed: its figures per seed and their objective's values."""

    weights: Weights
    figures: list[dict[str, float]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    first: Outcome | None = None

    @property
    def loss(self) -> float:
        return statistics.fmean(self.losses)

    @property
    def spread(self) -> float:
        return statistics.pstdev(self.losses) if len(self.losses) > 1 else 0.0

    def summary(self) -> dict[str, float]:
        """Each figure's mean over the seeds, and the spread of the objective's value."""
        names = self.figures[0].keys()
        found = {name: statistics.fmean(f[name] for f in self.figures) for name in names}
        return found | {"spread": self.spread}


@dataclass(slots=True)
class Result:
    """What the search found."""

    current: Trial
    best: Trial
    proposed: bool
    reason: str
    moved: int
    tried: int
    seconds: float
    cut_short: bool
    held_out: dict[str, dict[str, float]] | None = None

    @property
    def chosen(self) -> Trial:
        return self.best if self.proposed else self.current


def current_weights(book: RuleBook, extender: float) -> Weights:
    """The rule book's Enforce score rules' weights, and the extender's weight."""
    rules = {
        f"{rule_set.name}/{score.name}": score.weight
        for rule_set in book.rule_sets
        for score in rule_set.scores
        if score.enforce
    }
    return Weights(rules, extender)


def loss(figures: Mapping[str, float], objective: str, nodes: int) -> float:
    """The objective as a number to minimize: balance, max/mean node CPU (with a hundredth of the relative
    standard deviation to part ties); pack, minus the empty nodes, each node over the threshold costing more
    than every empty node gains. A pod no node takes costs as much as a node over."""
    penalty = nodes * (figures["over"] if objective == "pack" else 0.0) + nodes * figures["unschedulable"]
    if objective == "pack":
        return penalty - figures["empty"]
    return figures["max/mean"] + penalty


def candidates(current: Weights, active: Collection[str], rng: random.Random) -> Iterator[Weights]:
    """Each extender weight with the current rule weights, then random draws of the `active` rules' weights
    (those that ranked some pod's nodes; the others keep theirs) with an extender weight."""
    for extender in EXTENDER_GRID:
        if extender != current.extender:
            yield Weights(current.rules, float(extender))
    while True:
        rules = {name: rng.choice(RULE_GRID) if name in active else weight for name, weight in current.rules.items()}
        yield Weights(rules, float(rng.choice(EXTENDER_GRID)))


def place(scene: Scene, book: RuleBook, kube: Mapping[str, int], weights: Weights, search: Search) -> Trial:
    """`weights` placed with each of the search's seeds."""
    trial = Trial(weights)
    for index in range(search.seeds):
        outcome = simulate(scene, book, kube, weights, search.seed * 1000 + index + 1)
        figures = outcome.figures(search.threshold)
        trial.figures.append(figures)
        trial.losses.append(loss(figures, search.objective, len(outcome.cpu)))
        trial.first = trial.first or outcome
    return trial


def halves(scene: Scene, search: Search) -> tuple[Scene, Scene | None]:
    """The scene to tune on (the first half of the arrivals) and the one to check on (every arrival: the
    second half held out from the search); None: no held-out check."""
    arrivals = sorted(scene.arrivals, key=lambda a: a.at)
    if not search.holdout or len(arrivals) < 4:
        return scene, None
    return scene.part(arrivals[: len(arrivals) // 2]), scene


def tune(scene: Scene, book: RuleBook, kube: Mapping[str, int], current: Weights, search: Search) -> Result:
    """The best weights for the objective over the scene, or the current ones when none is better than noise."""
    started = time.monotonic()
    tuning, checking = halves(scene, search)
    rng = random.Random(search.seed)
    trials = [place(tuning, book, kube, current, search)]
    cut_short = False
    active = trials[0].first.scored if trials[0].first is not None else frozenset()
    for weights in candidates(current, active, rng):
        if len(trials) >= search.trials:
            break
        if time.monotonic() - started > search.max_seconds:
            cut_short = True
            break
        trials.append(place(tuning, book, kube, weights, search))
    base = trials[0]
    best = min(trials, key=lambda t: (t.loss, trials.index(t)))
    proposed, reason = judge(base, best)
    held = _held_out(checking, book, kube, (base, best), search) if best is not base else None
    if held is not None and proposed and held["best"].loss > held["current"].loss:
        proposed, reason = False, "the best weights do worse than the current ones once the held-out half is placed"
    summaries = {name: trial.summary() for name, trial in held.items()} if held is not None else None
    result = Result(base, best, proposed, reason, 0, len(trials), time.monotonic() - started, cut_short, summaries)
    if proposed:  # over every arrival when the held-out half was placed too
        before, after = (held["current"], held["best"]) if held is not None else (base, best)
        result.moved = moved(before.first, after.first)
    return result


def _held_out(
    checking: Scene | None, book: RuleBook, kube: Mapping[str, int], pair: tuple[Trial, Trial], search: Search
) -> dict[str, Trial] | None:
    """The current and the best weights placing every arrival (None: no held-out check)."""
    if checking is None:
        return None
    current, best = pair
    return {
        "current": place(checking, book, kube, current.weights, search),
        "best": place(checking, book, kube, best.weights, search),
    }


def judge(base: Trial, best: Trial) -> tuple[bool, str]:
    """Whether `best` beats the current weights by more than the larger spread of the two, and why."""
    if best is base:
        return False, "no weights tried do better than the current ones"
    noise = max(base.spread, best.spread)
    gain = base.loss - best.loss
    if gain <= noise:
        return False, f"the best gain ({gain:.4f}) is within the model's noise ({noise:.4f})"
    return True, f"better by {gain:.4f}, beyond the model's noise ({noise:.4f})"


def moved(before: Outcome | None, after: Outcome | None) -> int:
    """How many pods land on another node (first seed of each)."""
    if before is None or after is None:
        return 0
    return sum(1 for pod, node in after.placements.items() if before.placements.get(pod) != node)


def report(result: Result, search: Search, scene: Scene, source: Mapping[str, Any]) -> dict[str, Any]:
    """The whole report, as `--output json` prints it."""

    def side(trial: Trial) -> dict[str, Any]:
        return {"weights": trial.weights.as_dict(), "figures": trial.summary()}

    return {
        "source": dict(source),
        "objective": search.objective,
        "nodes": len(scene.nodes),
        "pods": len(scene.arrivals),
        "current": side(result.current),
        "best": side(result.best),
        "proposed": result.proposed,
        "reason": result.reason,
        "chosen": side(result.chosen),
        "podsMoved": result.moved,
        "heldOut": result.held_out,
        "search": {
            "tried": result.tried,
            "seeds": search.seeds,
            "seed": search.seed,
            "seconds": round(result.seconds, 2),
            "cutShort": result.cut_short,
            "holdout": result.held_out is not None or (search.holdout and len(scene.arrivals) >= 4),
        },
    }
