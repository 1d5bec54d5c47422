"""Each pod the index counts in `recent` (reserved by this extender, seen bound by the watch, or listed) is counted
with its fallback estimate made from the requests its view already holds, or from its limits when the fallback is
`limits`: the same numbers as the usage store gives the whole pod."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.usage.store import UsageStore
from rulesched.rules.estimate import Fallback
from tests.builders import make_pod

BEFORE_ANY_SAMPLE = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)


def sidecar_pod(name: str) -> dict[str, Any]:
    """Effective requests 1.5 cores (an app container of 1, a sidecar of 0.5); its app container's limit: 3."""
    resources = {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}
    sidecar = {"name": "proxy", "restartPolicy": "Always", "resources": resources}
    pod = make_pod(name, "shop", {"app": name}, {"cpu": "1"}, init_containers=[sidecar])
    pod["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "3"}
    return pod


@pytest.mark.parametrize(("fallback", "cpu"), [(Fallback("requests", 2.0), 3.0), (Fallback("limits", 0.5), 1.5)])
def test_placed_pods_count_their_fallback_estimate_whichever_way_the_index_learnt_of_them(
    fallback: Fallback, cpu: float
) -> None:
    store = UsageStore(fallback=fallback)
    assert store.estimate(sidecar_pod("alone"))["cpu"] == pytest.approx(cpu)
    index = PodIndex()
    index.estimator = store.estimate
    index.reserve(sidecar_pod("reserved"), "node-a")
    watched = sidecar_pod("watched")
    watched["spec"]["nodeName"] = "node-a"
    index.apply("ADDED", watched)
    recent = index.node_pods("node-a", BEFORE_ANY_SAMPLE).recent
    assert recent["requests"]["cpu"] == pytest.approx(3.0)
    assert recent["estimates"]["cpu"] == pytest.approx(2 * cpu)
    listed = sidecar_pod("listed")
    listed["spec"]["nodeName"] = "node-b"
    index.replace([listed])
    assert index.node_pods("node-b", BEFORE_ANY_SAMPLE).recent["estimates"]["cpu"] == pytest.approx(cpu)
