"""Descheduling, opt-in twice: the audit's violations of rule sets with `spec.descheduling`, acted on when the
server runs with `--deschedule dry-run` (logged and counted) or `--deschedule on` (evicted).

It runs in the audit's thread, after each audit step (`Auditor.descheduler`), with the audit's own node
contexts and plan copy. With `on`, only while this replica holds the lease (`writes/lease.py`). For each
pod with a violation of a filter the rule set's policy names (its first, in order), it checks, cheapest
first: the exclusions (`deschedule_policy.exclusion`, on the pod's placement view), the cool-down, the
policy's action (`Report` only logs), both rates, the anti-loop rule (another node that kube-scheduler's node
checks and the pod's filters both pass now, `deschedule_checks.elsewhere`), and last that the pod still
violates the rule on its node now (`deschedule_checks.still_violates`), at most `CHECKS_PER_STEP` such
evaluations a step. Then, if this replica still holds the lease, it evicts (`writes.evict.ApiEvicter`),
counts the answer by rule set and outcome, and writes an Event on the pod.

Each pod's state (why it stays, or the eviction's outcome) is logged once, when it changes.
"""

from __future__ import annotations

import datetime
import logging
import secrets
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rulesched.controllers.audit.audit import Violation
from rulesched.controllers.audit.deschedule_checks import elsewhere, rules_view, still_violates
from rulesched.controllers.audit.deschedule_policy import Exclusions, Memory, Rate, exclusion
from rulesched.rules.book import RuleBook
from rulesched.rules.model import Descheduling
from rulesched.settings import Settings, lease_times

if TYPE_CHECKING:
    from rulesched.cluster.kube.access import KubeAccess
    from rulesched.controllers.audit.auditor import Auditor
    from rulesched.writes.evict import ApiEvicter
    from rulesched.writes.lease import Elector

log = logging.getLogger("rulesched.decision")

Mode = Literal["dry-run", "on"]
View = Mapping[str, Any]
_WAITING = frozenset({"cooling-down", "rate-limited"})
CHECKS_PER_STEP = 4
"""Most anti-loop evaluations (the pod over every other node) one step makes."""
CANDIDATES_PER_STEP = 256
"""Most violating pods one step looks at, taking turns: the next step goes on where this one stopped."""


@dataclass(frozen=True, slots=True)
class DescheduleOptions:
    """The server's half of the opt-in (settings `deschedule`, `deschedule_rate`, `deschedule_cooldown`, …)."""

    mode: Mode
    rate: float = 5.0
    cooldown: float = 600.0
    exclusions: Exclusions = field(default_factory=Exclusions)


@dataclass(frozen=True, slots=True)
class Candidate:
    violation: Violation
    policy: Descheduling


class Descheduler:
    """Acts on the audit's violations; `step(auditor)` is called from the audit's thread."""

    def __init__(
        self,
        options: DescheduleOptions,
        evicter: ApiEvicter | None = None,
        elector: Elector | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.options = options
        self.evicter = evicter
        self.elector = elector
        self._clock = clock
        self._rate = Rate(options.rate, clock())
        self._rates: dict[str, Rate] = {}
        self._tried = Memory()
        self._states = Memory()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._cursor = 0

    def counts(self) -> dict[tuple[str, str], int]:
        """Evictions (and dry-run ones) by (rule set, outcome), since the start."""
        with self._lock:
            return dict(self._counts)

    def start(self) -> None:
        if self.elector is not None:
            self.elector.start()

    def stop(self) -> None:
        if self.elector is not None:
            self.elector.stop()

    def may_act(self) -> bool:
        """Dry-run acts everywhere (it only logs); `on`, only while this replica holds the lease."""
        return self.options.mode == "dry-run" or (self.elector is not None and self.elector.holding())

    def step(self, auditor: Auditor) -> None:
        """Look at up to `CANDIDATES_PER_STEP` violating pods, from where the last step stopped."""
        book = auditor.book
        if book is None or not self.may_act():
            return
        now = datetime.datetime.now(datetime.UTC)
        found = candidates(book, auditor.violations())
        start = self._cursor % len(found) if found else 0
        turn = (found[start:] + found[:start])[:CANDIDATES_PER_STEP]
        looked, checks = 0, CHECKS_PER_STEP
        for candidate in turn:
            if checks == 0 or not self.may_act():  # an eviction may take seconds: the lease may be gone since
                break
            looked += 1
            state, evaluated = self._look(book, auditor, candidate, now)
            checks -= evaluated
            if state == "rules-changed":
                break  # the audit's next step evaluates the new book: every violation may be gone
        self._cursor = start + looked

    def _look(self, book: RuleBook, auditor: Auditor, candidate: Candidate, now: datetime.datetime) -> tuple[str, bool]:
        """Act on one candidate: its state, and whether it took an evaluation (of the anti-loop rule)."""
        violation = candidate.violation
        view = rules_view(auditor, violation)
        if view is None:
            return "gone", False  # no longer on its node: nothing to log, the audit will see it
        placements = auditor.sources.placements
        placement = placements.get(violation.uid, violation.node) if placements is not None else None
        reason = self._stays(candidate, placement, now)
        evaluated = reason is None
        if reason is None:
            assert placement is not None  # `exclusion` keeps a pod without one
            reason = self._act(book, auditor, candidate, (view, placement), now)
        self._state(violation, reason)
        return reason, evaluated

    def _stays(self, candidate: Candidate, placement: Mapping[str, Any] | None, now: datetime.datetime) -> str | None:
        """Why the pod stays before any evaluation (None: go on to the anti-loop check)."""
        violation, policy = candidate.violation, candidate.policy
        reason = exclusion(placement, policy, self.options.exclusions, now)
        if reason is not None:
            return reason
        tried = self._tried.get(violation.uid)
        if tried is not None and self._clock() - tried < self.options.cooldown:
            return "cooling-down"
        if policy.action == "Report":
            return "report-only"
        rate = self._rate_of(violation.rule_set, policy)
        clock = self._clock()
        if not (self._rate.allows(clock) and rate.allows(clock)):
            return "rate-limited"
        return None

    def _act(
        self, book: RuleBook, auditor: Auditor, candidate: Candidate, views: tuple[View, View], now: datetime.datetime
    ) -> str:
        """The anti-loop check, the check that the pod still violates the rule now, then the eviction."""
        violation = candidate.violation
        if not elsewhere(auditor, book, *views, violation.node, now):
            return "nowhere-else"
        fresh = still_violates(auditor, book, violation, now)
        if fresh is not None:
            return fresh
        if self.options.mode == "dry-run" or self.evicter is None:
            self._take(violation)
            self._count(violation.rule_set, "dry-run")
            return "dry-run"
        return self._evict(self.evicter, violation)

    def _take(self, violation: Violation) -> None:
        """Take both rates' tokens and start the pod's cool-down."""
        self._rate.take()
        self._rates[violation.rule_set].take()
        self._tried.put(violation.uid, self._clock())

    def _evict(self, evicter: ApiEvicter, violation: Violation) -> str:
        """Evict the pod if this replica still holds the lease, checked right before the POST (whose timeout
        ends with the lease's hold); write the Event."""
        left = self.elector.left() if self.elector is not None else 0.0
        if left <= 0.0:
            return "lease-lost"
        self._take(violation)
        answer = evicter.evict(violation.namespace, violation.pod, violation.uid, timeout=left)
        self._count(violation.rule_set, answer.outcome)
        if answer.outcome == "evicted":
            why = f"evicted by rulesched from {violation.node}: rule {violation.rule_set}/{violation.rule}: "
            failed = evicter.record_event(violation.namespace, violation.pod, violation.uid, why + violation.message)
            if failed:
                log.warning("the Event of the eviction of %s/%s was not written: %s", *_pod(violation), failed)
        return answer.outcome if not answer.message else f"{answer.outcome}: {answer.message}"

    def _rate_of(self, rule_set: str, policy: Descheduling) -> Rate:
        rate = self._rates.get(rule_set)
        if rate is None or rate.per_minute != policy.maxEvictionsPerMinute:
            rate = self._rates[rule_set] = Rate(policy.maxEvictionsPerMinute, self._clock())
        return rate

    def _count(self, rule_set: str, outcome: str) -> None:
        with self._lock:
            self._counts[(rule_set, outcome)] += 1

    def _state(self, violation: Violation, state: str) -> None:
        """Log the pod's state when it changes (a refusal repeated after each cool-down is said once); waiting for
        the cool-down or the rate is no new state."""
        if state in _WAITING or self._states.get(violation.uid) == state:
            return
        self._states.put(violation.uid, state)
        fields = {"deschedule": state.split(":")[0], "violation": violation.as_dict(), "mode": self.options.mode}
        log.info("deschedule: %s/%s on %s (rule %s/%s): %s", *_pod(violation), violation.node, violation.rule_set,
                 violation.rule, state, extra=fields)  # fmt: skip


def build_descheduler(settings: Settings, access: KubeAccess | None) -> Descheduler | None:
    """The descheduler `settings` ask for: none (`off`), dry-run, or evicting through `access` with a lease."""
    if settings.deschedule == "off":
        return None
    exclusions = Exclusions(
        settings.deschedule_excluded_namespaces,
        system_critical=settings.deschedule_system_critical,
        local_storage=settings.deschedule_local_storage,
        claims=settings.deschedule_volume_claims,
        unchecked_placement=settings.deschedule_unchecked_placement,
    )
    options = DescheduleOptions(settings.deschedule, settings.deschedule_rate, settings.deschedule_cooldown, exclusions)
    if settings.deschedule == "dry-run" or access is None:
        return Descheduler(options)
    # Imported only when evicting: the kubernetes client is heavy, and only a cluster needs it.
    from rulesched.writes.evict import ApiEvicter
    from rulesched.writes.lease import Elector, LeaseClient, LeaseTimes

    identity = settings.lease_identity or f"{socket.gethostname()}_{secrets.token_hex(4)}"
    times = LeaseTimes(*(lease_times(settings) or ()))
    # A renewal that answers after the renew deadline is of no use: it may take no longer.
    lease = LeaseClient(
        access.api, settings.lease_namespace, settings.lease_name, timeout=min(5.0, times.renew_deadline)
    )
    elector = Elector(lease, identity, times)
    return Descheduler(options, ApiEvicter(access.api, identity=identity), elector)


def candidates(book: RuleBook, violations: Sequence[Violation]) -> list[Candidate]:
    """Per pod, its first violation of an Enforce filter its rule set's descheduling policy names."""
    policies = {rs.name: rs.source.spec.descheduling for rs in book.rule_sets if rs.source.spec.descheduling}
    found: dict[str, Candidate] = {}
    for violation in violations:
        policy = policies.get(violation.rule_set)
        if policy is None or not violation.enforce or violation.uid in found:
            continue
        if not policy.filters or violation.rule in policy.filters:
            found[violation.uid] = Candidate(violation, policy)
    return list(found.values())


def _pod(violation: Violation) -> tuple[str, str]:
    return violation.namespace, violation.pod
