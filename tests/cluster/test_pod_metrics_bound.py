"""The PodMetrics read is bounded in bytes (`--pod-metrics-max-bytes`): a list larger than the bound fails
the poll before it is decoded, whether it arrives chunked (as the API server sends lists) or with its
Content-Length, and the estimates keep what they learnt. The loopback API (`tests/kubeapi.py`) serves the
list; the bound is made small instead of the list made huge.
"""

from __future__ import annotations

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.usage.pod_metrics import PodMetricsPoller
from rulesched.cluster.usage.store import UsageOptions, UsageStore
from rulesched.settings import Settings
from tests.builders import make_pod
from tests.cluster.test_usage import owned, shop_pods
from tests.kubeapi import KubeAPI

BOUND = 4096
"""Bytes: the shop's five pods fit (about 1 KB), a hundred more do not."""


def test_the_default_bound_is_the_settings(access: KubeAccess) -> None:
    poller = PodMetricsPoller(access.api, UsageStore(), list, interval=60)
    assert poller.max_bytes == Settings().pod_metrics_max_bytes == 64 * 1024 * 1024


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_a_list_larger_than_the_bound_fails_the_poll_and_the_store_keeps_what_it_learnt(
    api: KubeAPI, access: KubeAccess, chunked: bool
) -> None:
    api.frame_pod_metrics(chunked=chunked)
    store = UsageStore(UsageOptions(quantile=1.0))
    pods = shop_pods()
    poller = PodMetricsPoller(access.api, store, lambda: pods, interval=60, max_bytes=BOUND)
    for pod in pods:
        api.set_pod_usage("shop", pod["metadata"]["name"], "1200m", "64Mi")
    assert poller.poll()
    new_batch = owned(make_pod("batch-new", "shop", None, {"cpu": "500m"}), "Job", "batch")
    assert store.estimate(new_batch)["samples"] == 1.0

    for n in range(100):
        api.set_pod_usage("crowd", f"pod-{n:03d}", "1", "1Gi")
    assert not poller.poll()
    assert f"--pod-metrics-max-bytes={BOUND}" in poller.loop.status().last_error
    assert store.estimate(new_batch)["samples"] == 1.0, "nothing of the refused list was recorded"

    bigger = PodMetricsPoller(access.api, store, lambda: pods, interval=60, max_bytes=1024 * 1024)
    assert bigger.poll(), "the same list within a larger bound is read"
    assert store.estimate(new_batch)["samples"] == 2.0
