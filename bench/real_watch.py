"""Following the pods of a real kube-apiserver, for the real-control-plane scripts: a list, then watches, each
resumed from the last resourceVersion seen, until the caller has seen what it waits for or its time is up.

One watch is not enough: kube-apiserver ends a watch whenever it likes, and says nothing about why. Its timeout
is one reason; the usual one under a burst is the watch cache closing a watcher that does not drain its buffer
quickly enough ("Forcing pods watcher close due to unresponsiveness" in its log at --v=1): a Python client
sharing two cores with kube-apiserver, kube-scheduler, etcd and rulesched falls behind. The stream then simply
ends, and a reader that does not resume sees no bind after it. Resumed from the last resourceVersion, no event
is lost; a resourceVersion too old to resume from (410 Gone, as an ERROR event or an HTTP status) means a new
list. Bookmarks keep the resourceVersion current while nothing in the selection changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

JSON = dict[str, Any]
Handler = Callable[[str, JSON], bool]
"""Called with each event's type (`ADDED`, `MODIFIED`, `DELETED`; a listed object comes as `ADDED`) and its
object; True when the caller has seen what it waits for."""
WATCH_SECONDS = 60
"""How long each watch asks kube-apiserver to keep it open; the next resumes where it ended."""
RETRY_SECONDS = 0.5
"""The pause before resuming after a watch the connection cut (not one the server ended)."""


class WatchError(Exception):
    """The API answered a list or a watch with an error other than 410 Gone."""


class _ExpiredError(Exception):
    """The resourceVersion to resume from is too old: list again."""


@dataclass
class Followed:
    """How the following goes: set `stopping` to end it; `opened` is set once the first list is handled (what
    happens after it will be seen). Then: streams resumed, lists made, the last connection error (if any), and
    whether the handler was satisfied."""

    stopping: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)
    resumed: int = 0
    listed: int = 0
    cut: str = ""
    done: bool = False


@dataclass(frozen=True)
class Selection:
    """What to follow: a collection's path and its list parameters (a field or label selector)."""

    path: str
    params: Mapping[str, str]


def follow(api: httpx.Client, selection: Selection, handle: Handler, deadline: float, followed: Followed,
           watch_seconds: int = WATCH_SECONDS) -> Followed:  # fmt: skip
    """List `selection`, then watch it, resuming every ended watch, until `handle` returns True, `deadline`
    (`time.monotonic()`) passes or `followed.stopping` is set."""
    version: str | None = None
    stop = followed.stopping
    while time.monotonic() < deadline and not stop.is_set():
        try:
            if version is None:
                version = _listed(api, selection, handle, followed)
            else:
                version = _watched(api, selection, version, handle, followed, _seconds(deadline, watch_seconds))
                followed.resumed += 0 if followed.done else 1
        except _ExpiredError:
            version = None
        except httpx.TransportError as error:  # the connection was cut: resume after a pause
            followed.cut = f"{type(error).__name__}: {error}"
            stop.wait(RETRY_SECONDS)
        if followed.done:
            break
    return followed


def _seconds(deadline: float, most: int) -> int:
    return max(1, min(most, int(deadline - time.monotonic()) + 1))


def _listed(api: httpx.Client, selection: Selection, handle: Handler, followed: Followed) -> str:
    """Every object of the selection handed over as ADDED; the list's resourceVersion."""
    answer = api.get(selection.path, params=dict(selection.params), timeout=30)
    if answer.status_code == 410:
        raise _ExpiredError
    if answer.is_error:
        raise WatchError(f"list {selection.path}: {answer.status_code} {answer.text[:300]}")
    listed = orjson.loads(answer.content)
    followed.listed += 1
    for item in listed["items"]:
        if handle("ADDED", item):
            followed.done = True
            break
    followed.opened.set()
    return str(listed["metadata"]["resourceVersion"])


def _watched(api: httpx.Client, selection: Selection, version: str, handle: Handler, followed: Followed,
             seconds: int) -> str:  # fmt: skip
    """One watch from `version`, its events handed over until it ends; the last resourceVersion seen."""
    params = {**selection.params, "watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
              "timeoutSeconds": str(seconds)}  # fmt: skip
    timeout = httpx.Timeout(30.0, read=seconds + 30.0)
    with api.stream("GET", selection.path, params=params, timeout=timeout) as response:
        if response.status_code == 410:
            raise _ExpiredError
        if response.is_error:
            raise WatchError(f"watch {selection.path}: {response.status_code} {response.read()[:300]!r}")
        for line in response.iter_lines():
            if line:
                version = _event(orjson.loads(line), version, handle, followed)
                if followed.done:
                    break
    return version


def _event(event: JSON, version: str, handle: Handler, followed: Followed) -> str:
    """One watch event handed over (a bookmark only moves the resourceVersion); the resourceVersion after it."""
    kind, found = event["type"], event["object"]
    if kind == "ERROR":
        if found.get("code") == 410:
            raise _ExpiredError
        raise WatchError(f"watch error: {found.get('code')} {found.get('message')}")
    if kind != "BOOKMARK" and handle(kind, found):
        followed.done = True
    return str(found["metadata"].get("resourceVersion") or version)
