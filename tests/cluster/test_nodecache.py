"""The node cache against a loopback API server speaking recorded kube-apiserver v1.32: list, watch, 410, outages."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.nodes.nodecache import NodeCache
from tests.kubeapi import KubeAPI, access_for, make_cache, wait_for

FIXTURE_NODES = {"node-a", "node-b", "node-c", "node-d", "node-e"}


def known(cache: NodeCache) -> set[str]:
    return {name for name in FIXTURE_NODES | {"node-f", "node-g", "node-x"} if cache.get(name) is not None}


def test_cache_is_not_ready_before_the_first_list(access: KubeAccess) -> None:
    cache = make_cache(access)
    assert not cache.ready()
    assert cache.get("node-a") is None
    assert cache.size() == 0


def test_first_list_fills_the_cache_with_the_nodes_as_the_api_sent_them(cache: NodeCache, api: KubeAPI) -> None:
    assert cache.ready()
    assert known(cache) == FIXTURE_NODES
    node = cache.get("node-a")
    assert node is not None
    assert node["metadata"]["labels"]["filter.xy.com"] == "yes"
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}  # camelCase, raw JSON
    assert "managedFields" in api.state.nodes["node-a"]["metadata"]
    assert "managedFields" not in node["metadata"], "server-side apply bookkeeping kept in the cache"
    assert cache.status().resource_version == "212"
    wait_for(lambda: bool(api.requests("GET /api/v1/nodes?allowWatchBookmarks=true")), what="the watch")
    assert "resourceVersion=212" in api.requests("GET /api/v1/nodes?allowWatchBookmarks=true")[0]


def test_list_is_read_in_pages(access: KubeAccess, api: KubeAPI) -> None:
    cache = make_cache(access, page_size=2)
    cache.start()
    try:
        assert cache.wait_ready(5)
        assert known(cache) == FIXTURE_NODES
        assert len(api.requests("GET /api/v1/nodes?limit=2")) == 1
        assert len(api.requests("GET /api/v1/nodes?continue=")) == 2
    finally:
        cache.stop()


def test_node_added_labelled_and_deleted_is_followed(cache: NodeCache, api: KubeAPI) -> None:
    api.add_node("node-f", {"topology.kubernetes.io/zone": "z3"})
    wait_for(lambda: cache.get("node-f") is not None, what="node-f added")
    rv = api.label_node("node-f", "filter.xy.com", "yes")
    wait_for(lambda: (cache.get("node-f") or {}).get("metadata", {}).get("resourceVersion") == str(rv))
    node = cache.get("node-f")
    assert node is not None
    assert node["metadata"]["labels"]["filter.xy.com"] == "yes"
    assert "managedFields" in api.state.nodes["node-f"]["metadata"]
    assert "managedFields" not in node["metadata"]
    api.delete_node("node-f")
    wait_for(lambda: cache.get("node-f") is None, what="node-f deleted")
    assert known(cache) == FIXTURE_NODES
    assert cache.size() == 5


def test_bookmark_moves_the_resource_version_the_next_watch_starts_from(access: KubeAccess, api: KubeAPI) -> None:
    cache = make_cache(access, watch_timeout=1)
    cache.start()
    try:
        assert cache.wait_ready(5)
        wait_for(lambda: bool(api.requests("GET /api/v1/nodes?allowWatchBookmarks=true")), what="the watch")
        api.bump()
        rv = api.bookmark()
        wait_for(lambda: cache.status().resource_version == str(rv), what="the bookmark")
        wait_for(lambda: any(f"resourceVersion={rv}&" in r for r in api.requests()), what="a watch from the bookmark")
        assert cache.status().relists == 1
    finally:
        cache.stop()


def test_expired_watch_relists_and_replaces_the_nodes_without_dropping_any(cache: NodeCache, api: KubeAPI) -> None:
    wait_for(lambda: bool(api.requests("GET /api/v1/nodes?allowWatchBookmarks=true")), what="the watch")

    def compacted_changes() -> None:  # changes whose events are lost: only a relist can see them
        api.add_node("node-x", silent=True)
        api.delete_node("node-e", silent=True)

    api.expire(compacted_changes)
    deadline = time.monotonic() + 5
    while cache.status().relists < 2:
        assert time.monotonic() < deadline, "no relist after 410 Gone"
        assert {"node-a", "node-b", "node-c", "node-d"} <= known(cache), "a node still there went missing"
    assert known(cache) == {"node-a", "node-b", "node-c", "node-d", "node-x"}
    api.label_node("node-x", "after", "relist")
    wait_for(lambda: "after" in (cache.get("node-x") or {}).get("metadata", {}).get("labels", {}))


def test_list_answering_410_is_retried(access: KubeAccess, api: KubeAPI) -> None:
    api.fail_lists(410, 500)
    cache = make_cache(access)
    cache.start()
    try:
        assert cache.wait_ready(5)
        assert known(cache) == FIXTURE_NODES
        assert len(api.requests("GET /api/v1/nodes?limit=")) == 3
    finally:
        cache.stop()


def test_api_outage_serves_the_cache_and_catches_up_afterwards(
    cache: NodeCache, api: KubeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "rulesched.cluster.nodes.nodecache")
    api.go_down()
    wait_for(lambda: cache.status().failing, what="the cache to notice the outage")
    wait_for(lambda: len(api.requests()) > 6, what="a few retries")
    assert known(cache) == FIXTURE_NODES
    api.add_node("node-g")
    api.delete_node("node-e")
    assert cache.get("node-g") is None
    api.come_back()
    wait_for(lambda: cache.get("node-g") is not None and cache.get("node-e") is None, what="the catch-up")
    assert (cache.status().failing, cache.status().last_error) == (False, "")
    assert cache.status().relists == 1  # resumed the watch from its resourceVersion: no relist needed
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "an outage is logged once, not once per retry"
    assert "serving the last known nodes" in warnings[0].getMessage()


def test_unreachable_api_at_start_leaves_the_cache_not_ready(tmp_path: Path) -> None:
    api = KubeAPI()
    api.go_down()
    access = access_for(api, tmp_path)
    cache = make_cache(access)
    cache.start()
    try:
        wait_for(lambda: cache.status().failing, what="the failure")
        assert not cache.ready()
        api.come_back()
        assert cache.wait_ready(5)
        assert known(cache) == FIXTURE_NODES
    finally:
        cache.stop()
        access.close()
        api.close()


def test_bad_token_is_reported_as_unauthorized(api: KubeAPI, tmp_path: Path) -> None:
    access = access_for(api, tmp_path, token="not-a-valid-token")
    cache = make_cache(access)
    cache.start()
    try:
        wait_for(lambda: cache.status().failing, what="the failure")
        assert cache.status().last_error == "Unauthorized"
        assert not cache.ready()
    finally:
        cache.stop()
        access.close()


def test_fetch_finds_a_node_the_watch_has_not_delivered(cache: NodeCache, api: KubeAPI) -> None:
    api.add_node("node-late", silent=True)
    assert cache.get("node-late") is None
    node = cache.fetch("node-late")
    assert node is not None
    assert node["kind"] == "Node"
    assert node["metadata"]["name"] == "node-late"
    assert cache.get("node-late") is node


def test_fetch_of_a_missing_node_is_none(cache: NodeCache, api: KubeAPI) -> None:
    started = time.monotonic()
    assert cache.fetch("node-zz") is None
    assert time.monotonic() - started < 1.0
    assert "GET /api/v1/nodes/node-zz" in api.requests()


def test_fetch_is_bounded_by_its_timeout(access: KubeAccess, api: KubeAPI) -> None:
    cache = make_cache(access, fetch_timeout=0.3)
    api.stall_gets(3.0)
    started = time.monotonic()
    assert cache.fetch("node-a") is None
    assert time.monotonic() - started < 1.5


def test_fetch_with_the_api_down_is_none(cache: NodeCache, api: KubeAPI) -> None:
    api.go_down()
    api.add_node("node-late", silent=True)
    assert cache.fetch("node-late") is None


def test_stop_ends_the_thread_promptly_during_a_watch(access: KubeAccess, api: KubeAPI) -> None:
    cache = make_cache(access, watch_timeout=30)
    cache.start()
    assert cache.wait_ready(5)
    wait_for(lambda: bool(api.requests("GET /api/v1/nodes?allowWatchBookmarks=true")), what="the watch")
    started = time.monotonic()
    cache.stop()
    assert time.monotonic() - started < 1.0
    assert not cache.loop.status().running


def test_a_missing_name_is_not_asked_again_within_its_ttl(access: KubeAccess, api: KubeAPI) -> None:
    cache = make_cache(access, unknown_ttl=0.5)
    assert [cache.fetch("node-zz") for _ in range(5)] == [None] * 5
    assert len(api.requests("GET /api/v1/nodes/node-zz")) == 1, "the negative cache did not hold the name"
    api.add_node("node-zz", silent=True)
    assert cache.fetch("node-zz") is None  # still within its ttl
    wait_for(lambda: cache.fetch("node-zz") is not None, what="the name to be asked again after its ttl")
    assert len(api.requests("GET /api/v1/nodes/node-zz")) == 2


def test_without_a_ttl_every_fetch_asks(access: KubeAccess, api: KubeAPI) -> None:
    cache = make_cache(access, unknown_ttl=0)
    for _ in range(3):
        assert cache.fetch("node-zz") is None
    assert len(api.requests("GET /api/v1/nodes/node-zz")) == 3


def test_during_an_outage_fetches_back_off_for_every_name(cache: NodeCache, api: KubeAPI) -> None:
    api.go_down()
    wait_for(lambda: cache.status().failing, what="the cache to notice the outage")
    before = len(api.requests("GET /api/v1/nodes/"))
    names = [f"node-new-{i}" for i in range(20)]
    assert [cache.fetch(name) for name in names * 3] == [None] * 60
    asked = len(api.requests("GET /api/v1/nodes/")) - before
    assert asked <= 1, f"{asked} direct GETs during an outage for 60 lookups"
    api.come_back()
    api.add_node("node-new-0", silent=True)
    wait_for(lambda: not cache.status().failing, what="the cache to recover")
    wait_for(lambda: cache.fetch("node-new-0") is not None, what="lookups to resume once the API answers")


def test_the_negative_cache_keeps_a_bounded_number_of_names(access: KubeAccess, api: KubeAPI) -> None:
    cache = make_cache(access, unknown_ttl=60, unknown_kept=3)
    for name in ("node-x1", "node-x2", "node-x3", "node-x4"):
        assert cache.fetch(name) is None
    assert cache.fetch("node-x1") is None  # forgotten (the oldest): asked again
    assert cache.fetch("node-x4") is None  # remembered: not asked
    assert len(api.requests("GET /api/v1/nodes/node-x1")) == 2
    assert len(api.requests("GET /api/v1/nodes/node-x4")) == 1
