"""One burst of pods through a real kube-scheduler, for `bench/real_scheduler.py`: the pods created, when each
was bound (a pod watch opened before the first create), and the pods deleted again afterwards.

The pods are alike but for every `PROBE_EVERY`-th, labelled `PROBE_LABEL`, which the shadow book's own filter
keeps off the drained nodes: so the shadow's filter answers differ for exactly those pods.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson

from bench.real_cluster import Cluster

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
    """When each pod of a namespace was first seen with a node, from one pod watch."""

    def __init__(self, cluster: Cluster, namespace: str, pods: int) -> None:
        super().__init__(name=f"watch {namespace}", daemon=True)
        self.cluster, self.path, self.pods = cluster, f"/api/v1/namespaces/{namespace}/pods", pods
        self.bound: dict[str, float] = {}
        self.opened, self.all_bound = threading.Event(), threading.Event()
        self.error = ""
        """Why the watch ended before every pod was bound (the API went away: the run is being stopped)."""

    def run(self) -> None:
        try:
            self.watch()
        except httpx.HTTPError as error:
            self.error = f"the pod watch ended: {error}"

    def watch(self) -> None:
        params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": str(int(BIND_SECONDS))}
        timeout = httpx.Timeout(10.0, read=BIND_SECONDS + 30)
        with self.cluster.client() as api, api.stream("GET", self.path, params=params, timeout=timeout) as response:
            self.opened.set()
            for line in response.iter_lines():
                event = orjson.loads(line) if line else None
                if event and event["type"] in ("ADDED", "MODIFIED") and event["object"]["spec"].get("nodeName"):
                    self.bound.setdefault(event["object"]["metadata"]["name"], time.monotonic())
                    if len(self.bound) >= self.pods:
                        self.all_bound.set()
                        return


def burst(cluster: Cluster, namespace: str, pods: int) -> JSON:
    """`pods` pods created in a new `namespace` from `CREATORS` threads, timed from the first create until all
    are bound (at most `BIND_SECONDS`): pods a second over that time, and the bind rate (from the first bind to
    the last, which leaves the creating client out)."""
    with cluster.client(CREATORS) as api:
        api.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).raise_for_status()
        watch = Bindings(cluster, namespace, pods)
        watch.start()
        if not watch.opened.wait(30):
            raise TimeoutError(f"the pod watch of {namespace} did not open in 30 s")
        started_at = time.monotonic()
        with ThreadPoolExecutor(CREATORS) as creators:
            for created in creators.map(lambda i: api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod(i)),
                                        range(pods)):  # fmt: skip
                created.raise_for_status()
        created_s = time.monotonic() - started_at
        watch.all_bound.wait(BIND_SECONDS)
    times = sorted(watch.bound.values())
    last = times[-1] if times else time.monotonic()
    return {
        "namespace": namespace,
        "bound": len(times),
        "all_bound": len(times) == pods,
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
