"""Recordings made by a real server for the recording and replay tests: scheduler-like traffic in either
wire mode against the live rules of `tests/rulebooks.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml

from rulesched.settings import Settings
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES
from tests.rulebooks import CLASSIC, LIVE, SURVIVORS, pod, rules_dir
from tests.server import running

PODS = (("web-1", False), ("web-2", False), ("web-3", False), ("job-1", True))
"""Four pods, one of them a batch pod (which the shadow rules make unschedulable)."""


def classic_nodes() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(EXAMPLE_NODES.read_text())["items"]
    return [n for n in items if n["metadata"]["name"] in CLASSIC]


def body(mode: str, name: str, batch: bool, names: list[str]) -> dict[str, Any]:
    if mode == "names":
        return {"Pod": pod(name, batch=batch), "Nodes": None, "NodeNames": names}
    nodes = [n for n in classic_nodes() if n["metadata"]["name"] in names]
    return {"Pod": pod(name, batch=batch), "Nodes": {"items": nodes}, "NodeNames": None}


def traffic(mode: str) -> list[tuple[str, dict[str, Any]]]:
    """Each pod: a filter over the classic nodes, then a prioritize over the two that pass."""
    calls = []
    for name, batch in PODS:
        calls.append(("/filter", body(mode, name, batch, CLASSIC)))
        calls.append(("/prioritize", body(mode, name, batch, SURVIVORS)))
    return calls


def settings(directory: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "rules_dir": rules_dir(directory / "live", LIVE),
        "nodes_file": EXAMPLE_NODES,
        "metrics_file": EXAMPLE_METRICS,
        "cluster": "off",
    }
    return Settings(**(base | overrides))


def record(directory: Path, mode: str, **overrides: Any) -> tuple[Path, list[bytes]]:
    """A recording of `traffic(mode)` in `directory/recording`, and the answers the calls got."""
    target = directory / "recording"
    with running(settings(directory, record_dir=target, **overrides)) as server, httpx.Client(base_url=server.url) as c:
        answers = [c.post(path, json=call).content for path, call in traffic(mode)]
    return target, answers  # the server stopped: every queued call is written and the segment closed
