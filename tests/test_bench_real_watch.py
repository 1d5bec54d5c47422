"""`bench/real_watch.py`, the pod following of the real-control-plane scripts, against the loopback API
(`tests/kubeapi.py`): a watch the server ends is resumed where it ended, an expired resourceVersion means a new
list, and no bind is missed either way. Without the resuming, a burst's pod watch on kube-apiserver v1.36 stopped
seeing binds after 78-99 of 300 pods (issue #39).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from bench.real_watch import JSON, Followed, Selection, WatchError, follow
from tests.kubeapi import TOKEN, KubeAPI, wait_for

NAMESPACE = "burst"
SELECTION = Selection("/api/v1/pods", {"fieldSelector": f"metadata.namespace={NAMESPACE}"})


class Binds:
    """The handler under test's view: which pods were seen bound, and when it has seen `wanted` of them."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.bound: set[str] = set()

    def __call__(self, kind: str, found: JSON) -> bool:
        if kind != "DELETED" and found["spec"].get("nodeName"):
            self.bound.add(found["metadata"]["name"])
        return len(self.bound) >= self.wanted


@pytest.fixture
def client(api: KubeAPI) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False) as found:
        yield found


def following(client: httpx.Client, binds: Binds, seconds: float = 20) -> tuple[threading.Thread, Followed]:
    followed = Followed()
    deadline = time.monotonic() + seconds
    thread = threading.Thread(target=follow, args=(client, SELECTION, binds, deadline, followed, 1), daemon=True)
    thread.start()
    assert followed.opened.wait(10)
    return thread, followed


def bind_one(api: KubeAPI, index: int) -> None:
    api.add_pod(NAMESPACE, f"p-{index}", f"uid-p-{index}")
    api.bind(NAMESPACE, f"p-{index}", "node-a")


def test_a_watch_the_server_ends_is_resumed_and_no_bind_is_missed(api: KubeAPI, client: httpx.Client) -> None:
    binds = Binds(wanted=5)
    thread, followed = following(client, binds)
    for index in range(5):  # one a watch: each watch is asked to last a second
        bind_one(api, index)
        time.sleep(1.2)
    thread.join(10)
    assert binds.bound == {f"p-{index}" for index in range(5)}
    assert followed.done
    assert followed.resumed >= 3
    assert followed.listed == 1


def test_an_expired_resource_version_means_a_new_list_and_no_bind_is_missed(api: KubeAPI, client: httpx.Client) -> None:
    binds = Binds(wanted=3)
    thread, followed = following(client, binds)
    bind_one(api, 0)
    wait_for(lambda: binds.bound == {"p-0"}, what="the first bind")
    api.expire(lambda: bind_one(api, 1))
    bind_one(api, 2)
    thread.join(10)
    assert binds.bound == {"p-0", "p-1", "p-2"}
    assert followed.listed == 2


def test_pods_bound_before_the_list_are_in_it(api: KubeAPI, client: httpx.Client) -> None:
    for index in range(3):
        bind_one(api, index)
    binds = Binds(wanted=3)
    followed = follow(client, SELECTION, binds, time.monotonic() + 10, Followed(), 1)
    assert (followed.done, followed.listed, followed.resumed) == (True, 1, 0)


def test_it_stops_at_its_deadline_when_the_pods_never_come(api: KubeAPI, client: httpx.Client) -> None:
    started = time.monotonic()
    followed = follow(client, SELECTION, Binds(wanted=1), started + 1.5, Followed(), 1)
    assert not followed.done
    assert time.monotonic() - started < 5


def test_a_refused_list_is_an_error(api: KubeAPI, client: httpx.Client) -> None:
    api.forbid("pods", "list")
    with pytest.raises(WatchError, match="403"):
        follow(client, SELECTION, Binds(wanted=1), time.monotonic() + 5, Followed(), 1)
