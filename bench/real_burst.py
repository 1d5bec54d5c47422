"""One burst of pods through a real kube-scheduler, for `bench/real_scheduler.py`: the pods created, when each
was bound (a pod list and the watches after it, opened before the first create and resumed whenever
kube-apiserver ends one: `bench/real_watch.py`), how many the API lists bound at the end, and the pods deleted
again afterwards.

The pods are alike but for every `PROBE_EVERY`-th, labelled `PROBE_LABEL`, which the shadow book's own filter
keeps off the drained nodes: so the shadow's filter answers differ for exactly those pods.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from bench.real_cluster import Cluster
from bench.real_watch import Followed, Selection, WatchError, follow

JSON = dict[str, Any]
PROBE_EVERY = 5
"""Every fifth pod (the first included) is a probe."""
PROBE_LABEL = "shadow-probe"
CREATORS = 16
"""Threads creating the pods, so that creation overlaps scheduling, as a Deployment's ReplicaSet would."""
BIND_SECONDS = 300.0
"""How long the pods of a burst may take to be bound."""
DELETE_SECONDS = 60.0
"""How long the pods of a burst may take to be gone after their deletion."""


def probes(pods: int) -> int:
    """How many of `pods` pods are probes."""
    return len(range(0, pods, PROBE_EVERY))


def pod(index: int) -> JSON:
    """The burst's pod `index`: 100m CPU and 128Mi requested, an image never pulled (there is no kubelet)."""
    labels = {"app": "burst", **({PROBE_LABEL: "true"} if index % PROBE_EVERY == 0 else {})}
    container = {"name": "c", "image": "registry.k8s.io/pause:3.9",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{index:04d}", "labels": labels},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}}  # fmt: skip


class Bindings(threading.Thread):
    """When each pod of a namespace was first seen with a node, from a list and the watches after it
    (`bench/real_watch.py`: a watch kube-apiserver ends is resumed)."""

    def __init__(self, cluster: Cluster, namespace: str, pods: int) -> None:
        super().__init__(name=f"watch {namespace}", daemon=True)
        self.cluster, self.pods = cluster, pods
        self.selection = Selection(f"/api/v1/namespaces/{namespace}/pods", {})
        self.bound: dict[str, float] = {}
        self.all_bound = threading.Event()
        self.followed = Followed()
        self.error = ""
        """Why the following ended before every pod was bound (the API answered an error)."""

    def run(self) -> None:
        try:
            with self.cluster.client() as api:
                follow(api, self.selection, self.seen, time.monotonic() + BIND_SECONDS, self.followed)
        except (httpx.HTTPError, WatchError) as error:
            self.error = f"the pod watch ended: {error}"
        finally:
            self.followed.opened.set()  # also when the first list failed: the caller need not wait

    def seen(self, kind: str, found: JSON) -> bool:
        """Note the pod's first bind; True once every pod is bound."""
        if kind in ("ADDED", "MODIFIED") and found["spec"].get("nodeName"):
            self.bound.setdefault(found["metadata"]["name"], time.monotonic())
            if len(self.bound) >= self.pods:
                self.all_bound.set()
                return True
        return False


def bound_now(cluster: Cluster, namespace: str) -> int:
    """How many pods of `namespace` the API says are bound (a list: the check on what the watches saw)."""
    with cluster.client() as api:
        listed = api.get(f"/api/v1/namespaces/{namespace}/pods", timeout=30).raise_for_status().json()["items"]
    return sum(1 for found in listed if found["spec"].get("nodeName"))


def burst(cluster: Cluster, namespace: str, pods: int) -> JSON:
    """`pods` pods created in a new `namespace` from `CREATORS` threads, timed from the first create until all
    are bound (at most `BIND_SECONDS`): pods a second over that time, and the bind rate (from the first bind to
    the last, which leaves the creating client out)."""
    with cluster.client(CREATORS) as api:
        api.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).raise_for_status()
        watch = Bindings(cluster, namespace, pods)
        watch.start()
        if not watch.followed.opened.wait(30):
            raise TimeoutError(f"the pod watch of {namespace} did not open in 30 s")
        started_at = time.monotonic()
        with ThreadPoolExecutor(CREATORS) as creators:
            for created in creators.map(lambda i: api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod(i)),
                                        range(pods)):  # fmt: skip
                created.raise_for_status()
        created_s = time.monotonic() - started_at
        watch.all_bound.wait(BIND_SECONDS)
        watch.followed.stopping.set()
    listed = bound_now(cluster, namespace)
    times = sorted(watch.bound.values())
    last = times[-1] if times else time.monotonic()
    return {
        "namespace": namespace,
        "bound": len(times),
        "all_bound": len(times) == pods,
        "bound_listed": listed,
        "watch_resumed": watch.followed.resumed,
        "watch_listed": watch.followed.listed,
        "created_s": round(created_s, 3),
        "all_bound_s": round(last - started_at, 3),
        "pods_per_s": round(len(times) / (last - started_at), 1),
        **({"watch_error": watch.error} if watch.error else {}),
        "bind_rate": round((len(times) - 1) / (last - times[0]), 1) if len(times) > 1 and last > times[0] else None,
    }


def delete_pods(cluster: Cluster, namespace: str) -> None:
    """Every pod of `namespace` deleted at once (no grace: there is no kubelet to wait for) and waited for, so
    that the next run starts on empty nodes."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    with cluster.client() as api:
        api.delete(path, params={"gracePeriodSeconds": "0"}).raise_for_status()
        deadline = time.monotonic() + DELETE_SECONDS
        while api.get(path).raise_for_status().json()["items"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pods of {namespace} were not gone {DELETE_SECONDS:g} s after their deletion")
            time.sleep(0.2)
