"""`estimate`: what a new pod will use, and the fallback for a pod whose workload was never measured.

An estimate is a map of doubles in the units of `requests` (`cpu` in cores, `memory` in bytes) and
`samples`: how many polls of its workload's usage it comes from (0: the fallback). The cluster side
(`rulesched/cluster/usage/store.py`) learns estimates from the usage of a workload's pods; this module knows
only the fallback, so that an evaluation without any usage source (a RuleTest, `rulesched explain`, a
cluster without pod metrics) sees `estimate` equal to `requests` by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rulesched.rules.context import resource_numbers
from rulesched.rules.pod_values import pod_requests

ESTIMATE_NAME = "estimate"
"""The context name of the pod's estimate (beside `requests`); a node's `recent.estimates` sums them."""
RECENT_ESTIMATES = "estimates"
"""The field of `recent` that sums the estimates of the pods placed since the node's sample."""
RESOURCES = ("cpu", "memory")
"""What an estimate gives: always both, 0 when nothing is known."""

Basis = Literal["requests", "limits"]


@dataclass(frozen=True, slots=True)
class Fallback:
    """The estimate of a pod whose workload was never measured: `factor` times its requests or limits
    (a container without a limit counts its request)."""

    basis: Basis = "requests"
    factor: float = 1.0


REQUESTS = Fallback()
"""The default fallback: the pod's requests, so that rules see `estimate == requests` without pod metrics."""


def pod_limits(pod: Mapping[str, Any]) -> dict[str, float]:
    """The sum of the app containers' limits, a container without a limit for a resource counting its request."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    total: dict[str, float] = {}
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else []:
        resources = container.get("resources") if isinstance(container, Mapping) else None
        resources = resources if isinstance(resources, Mapping) else {}
        own = {**resource_numbers(resources.get("requests")), **resource_numbers(resources.get("limits"))}
        for name, value in own.items():
            total[name] = total.get(name, 0.0) + value
    return total


def fallback_estimate(
    pod: Mapping[str, Any], fallback: Fallback = REQUESTS, requests: Mapping[str, float] | None = None
) -> dict[str, float]:
    """The fallback estimate of `pod` (`requests`: its effective requests, when already computed)."""
    if fallback.basis == "limits" and isinstance(pod.get("spec"), Mapping):
        base: Mapping[str, float] = pod_limits(pod)
    else:
        base = requests if requests is not None else pod_requests(pod)
    found = {name: float(base.get(name, 0.0)) * fallback.factor for name in RESOURCES}
    found["samples"] = 0.0
    return found


def estimate_or_fallback(estimate: Mapping[str, float] | None, pod: Mapping[str, Any]) -> Mapping[str, float]:
    """`estimate` when given, else the default fallback of `pod` (its requests)."""
    return estimate if estimate is not None else fallback_estimate(pod)
