"""`rulesched serve --record DIR`: what a recording holds, written off the request path, bounded and rotated."""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.recording_format import FORMAT, VERSION
from tests.recordings import record, settings, traffic
from tests.rulebooks import CLASSIC, names_args, pod
from tests.server import running


def records(segment: Path) -> list[dict[str, Any]]:
    with gzip.open(segment) as stream:
        return [json.loads(line) for line in stream]


def test_answers_are_the_same_bytes_with_and_without_a_recording(tmp_path: Path) -> None:
    with running(settings(tmp_path)) as server, httpx.Client(base_url=server.url) as client:
        expected = [client.post(path, json=body).content for path, body in traffic("names")]
    _, got = record(tmp_path, "names")
    assert got == expected


@pytest.mark.parametrize("mode", ["names", "full"])
def test_a_recording_holds_every_call_and_each_state_once(tmp_path: Path, mode: str) -> None:
    recording, _ = record(tmp_path, mode)
    [segment] = list(recording.iterdir())
    assert segment.name == "segment-000001.jsonl.gz"
    found = records(segment)
    header = found[0]
    assert {k: header[k] for k in ("type", "format", "version")} == {"type": "header", "format": FORMAT, "version": 1}
    kinds = [r["type"] for r in found[1:]]
    # 8 calls over 3 nodes that never changed: each node, its context and its (empty) pods written once.
    assert kinds.count("call") == 8
    assert kinds.count("node") == 3
    assert kinds.count("context") == 3
    assert kinds.count("pods") == 1
    first = next(r for r in found if r["type"] == "call")
    assert first["verb"] == "filter"
    assert first["mode"] == mode
    assert first["decision"] == {
        "passed": ["k8s-node1", "k8s-node2"],
        "rejected": {"k8s-master": "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"},
        "rejections": {"xy-least-cpu/require-xy-label": 1},
        "deadlineExceeded": False,
    }
    contexts = {r["id"]: r for r in found if r["type"] == "context"}
    node1 = next(contexts[c] for c in first["candidates"] if contexts[c]["name"] == "k8s-node1")
    assert node1["metrics"]["cpu"] == {"usage": 0.087, "utilization": 0.0435}
    prioritize = next(r for r in found if r["type"] == "call" and r["verb"] == "prioritize")
    assert prioritize["decision"] == {"scores": {"k8s-node1": 0, "k8s-node2": 10}, "deadlineExceeded": False}


def test_segments_rotate_and_the_oldest_go_past_the_size_cap(tmp_path: Path) -> None:
    target = tmp_path / "recording"
    options = settings(tmp_path, record_dir=target, record_segment_bytes=4096, record_max_bytes=4096)
    with running(options) as server, httpx.Client(base_url=server.url) as client:
        for index in range(60):  # each call writes its new pod: about 600 bytes before compression
            assert client.post("/filter", json=names_args(pod(f"pod-{index}"), CLASSIC)).status_code == 200
        recorder = server.parts.app.state.extender.recorder
    segments = sorted(p.name for p in target.iterdir())
    numbers = [int(name[len("segment-") : len("segment-") + 6]) for name in segments]
    assert recorder.number >= 5  # segments were begun again and again (about 6 calls each)...
    assert 1 not in numbers  # ...and the oldest deleted
    assert numbers == list(range(numbers[0], recorder.number + 1))  # the newest kept, none in between lost
    assert sum(p.stat().st_size for p in target.iterdir()) <= 4096
    for name in segments:  # each segment stands alone: its header, then whole calls and their state
        found = records(target / name)
        assert found[0]["type"] == "header"
        assert found[0]["version"] == VERSION
        assert found[-1]["type"] == "call"


def test_the_queue_is_bounded_and_calls_it_cannot_hold_are_counted(tmp_path: Path) -> None:
    target = tmp_path / "recording"
    with running(settings(tmp_path, record_dir=target, record_queue=1)) as server:

        def burst(worker: int) -> int:
            with httpx.Client(base_url=server.url) as client:
                for index in range(40):
                    body = names_args(pod(f"p-{worker}-{index}"), CLASSIC)
                    assert client.post("/filter", json=body).status_code == 200
            return 40

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            sent = sum(pool.map(burst, range(6)))
        written, dropped = recorded_counts(server.url, sent)
    assert written + dropped == sent == 240
    assert dropped > 0
    calls = [r for s in target.iterdir() for r in records(s) if r["type"] == "call"]
    assert len(calls) == written


def recorded(text: str, result: str) -> int:
    prefix = f'rulesched_recording_calls_total{{result="{result}"}} '
    return next((int(float(line[len(prefix) :])) for line in text.splitlines() if line.startswith(prefix)), 0)


def recorded_counts(url: str, total: int) -> tuple[int, int]:
    """Calls written and dropped as /metrics counts them, once they add up to `total` (bounded wait)."""
    deadline = time.monotonic() + 15
    while True:
        text = httpx.get(f"{url}/metrics").text
        written, dropped = recorded(text, "written"), recorded(text, "dropped")
        if written + dropped >= total or time.monotonic() > deadline:
            return written, dropped
        time.sleep(0.05)


def test_the_recording_is_off_by_default(tmp_path: Path) -> None:
    with running(settings(tmp_path)) as server:
        assert server.parts.app.state.extender.recorder is None
        text = httpx.get(f"{server.url}/metrics").text
    assert "rulesched_recording_calls_total{" not in text
