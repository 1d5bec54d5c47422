"""Recordings: every answered filter and prioritize call, and the cluster state it saw, for `rulesched replay`.

`--record DIR` writes gzip-compressed JSON Lines segments, `segment-000001.jsonl.gz` and on. Each segment
stands alone: a header line (format name and version), then records that define the state a call saw —
nodes, pods on nodes, node contexts (a node with its metrics and pods as the rules saw them), the pod,
its namespace — each written once per segment and version, then the call, which refers to them by id.
The format is described in docs/operations/recording.md; a reader refuses a version it does not know.

Nothing here runs on the event loop but `submit`, which queues the call (bounded: when `--record-queue`
calls wait, the next is left out and counted). One writer thread serializes, only while no call is
being answered, closes a segment past `--record-segment-bytes` and deletes the oldest segments past
`--record-max-bytes` on disk.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import logging
import queue
import threading
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rulesched.extender.metrics import Metrics
from rulesched.handoff.answered import Answered
from rulesched.handoff.idle import Idle
from rulesched.recording_format import (
    FORMAT,
    SEGMENT,
    VERSION,
    CallKeys,
    DecisionKeys,
    HeaderKeys,
    Keys,
    Kind,
    NodeContextKeys,
    PodsKeys,
)
from rulesched.rules.context import NodeContext, NodePods

log = logging.getLogger("rulesched.recording")

TABLE_KEPT = 50_000
"""Objects a segment remembers having written, per kind; beyond it they are written again when next seen."""
_FLUSH_SECONDS = 1.0


def rulesched_version() -> str:
    try:
        return importlib.metadata.version("rulesched")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def segment_name(number: int) -> str:
    return f"segment-{number:06d}.jsonl.gz"


def segment_files(directory: Path) -> list[Path]:
    """The segments of a recording directory, oldest first."""
    found = [(int(m[1]), p) for p in directory.iterdir() if (m := SEGMENT.match(p.name)) and p.is_file()]
    return [p for _, p in sorted(found)]


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=str, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)


class Segment:
    """One segment being written: its file and the ids of the objects already in it."""

    def __init__(self, path: Path, number: int) -> None:
        self.path = path
        self.raw = path.open("xb")
        self.file = gzip.GzipFile(fileobj=self.raw, mode="wb", compresslevel=6)
        self.tables: dict[str, dict[Hashable, tuple[Any, str]]] = {k: {} for k in "nkcps"}
        self.counter = 0
        self.written = 0
        """Bytes written before compression: what `--record-segment-bytes` bounds (the compressed size lags
        behind, in the compressor's buffer)."""
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        header = {
            Keys.TYPE: Kind.HEADER,
            HeaderKeys.FORMAT: FORMAT,
            HeaderKeys.VERSION: VERSION,
            HeaderKeys.RULESCHED: rulesched_version(),
            HeaderKeys.SEGMENT: number,
            HeaderKeys.STARTED: started,
        }
        self.file.write(_dumps(header))

    def size(self) -> int:
        return self.raw.tell()

    def flush(self) -> None:
        self.file.flush()
        self.raw.flush()

    def close(self) -> None:
        self.file.close()
        self.raw.close()

    def _ref(self, kind: str, key: Hashable, held: Any, record: Any, out: list[bytes]) -> str:
        """The id of an object in this segment, writing its record (`record()`) the first time."""
        table = self.tables[kind]
        found = table.get(key)
        if found is not None and found[0] is held:
            return found[1]
        if len(table) >= TABLE_KEPT:
            table.clear()
        self.counter += 1
        ref = f"{kind}{self.counter}"
        table[key] = (held, ref)
        out.append(_dumps({Keys.TYPE: _KINDS[kind], Keys.ID: ref, **record()}))
        return ref

    def write(self, answered: Answered) -> None:
        out: list[bytes] = []
        candidates = [self._context(c, out) for c in answered.contexts]
        pod = self._object("k", answered.pod, out)
        namespace = self._object("s", answered.namespace, out) if answered.namespace is not None else None
        book = answered.book
        call = {
            Keys.TYPE: Kind.CALL,
            CallKeys.VERB: answered.verb,
            CallKeys.MODE: "full" if answered.full else "names",
            CallKeys.NOW: answered.now.isoformat(),
            CallKeys.POD: pod,
            CallKeys.NAMESPACE: namespace,
            CallKeys.CANDIDATES: candidates,
            CallKeys.UNKNOWN: dict(answered.unknown),
            CallKeys.RULES: {CallKeys.GENERATION: book.generation, CallKeys.HASH: book.hash},
            CallKeys.DECISION: decision_record(answered),
        }
        if answered.estimate is not None:
            call[CallKeys.ESTIMATE] = dict(answered.estimate)
        out.append(_dumps(call))
        data = b"".join(out)
        self.written += len(data)
        self.file.write(data)

    def _object(self, kind: str, obj: Mapping[str, Any], out: list[bytes]) -> str:
        """A node, pod or namespace: once per resourceVersion (once per object without one)."""
        metadata = obj.get("metadata") or {}
        version = metadata.get("resourceVersion")
        if version:  # the same version is the same object: compared by key alone
            key: Hashable = (metadata.get("namespace"), metadata.get("name"), metadata.get("uid"), version)
            return self._ref(kind, key, None, lambda: {Keys.OBJECT: obj}, out)
        return self._ref(kind, id(obj), obj, lambda: {Keys.OBJECT: obj}, out)

    def _context(self, context: NodeContext, out: list[bytes]) -> str:
        def record() -> dict[str, Any]:
            node = self._object("n", context.node, out)
            pods = self._pods(context.name, context.pods, out)
            return {
                NodeContextKeys.NAME: context.name,
                NodeContextKeys.NODE: node,
                NodeContextKeys.METRICS: context.metrics,
                NodeContextKeys.PODS: pods,
            }

        return self._ref("c", id(context), context, record, out)

    def _pods(self, name: str, pods: NodePods, out: list[bytes]) -> str:
        def record() -> dict[str, Any]:
            return {
                PodsKeys.NODE: name,
                PodsKeys.PODS: list(pods.pods),
                PodsKeys.ALLOCATED: pods.allocated,
                PodsKeys.RECENT: pods.recent,
                PodsKeys.RECENT_UIDS: sorted(pods.recent_uids),
            }

        return self._ref("p", id(pods), pods, record, out)


_KINDS = {"n": Kind.NODE, "k": Kind.POD, "c": Kind.CONTEXT, "p": Kind.PODS, "s": Kind.NAMESPACE}


def decision_record(answered: Answered) -> dict[str, Any]:
    """What the live rules decided, as replay compares it: filter's passing nodes, reasons and rejections per
    rule; prioritize's final scores."""
    decision = answered.decision
    if answered.verb == "prioritize":
        scores = {name: node.score or 0 for name, node in decision.nodes.items()}
        return {DecisionKeys.SCORES: scores, DecisionKeys.DEADLINE_EXCEEDED: decision.deadline_exceeded}
    rejected = {name: node.reason or "" for name, node in decision.nodes.items() if not node.passed}
    failures = decision.failures()
    return {
        DecisionKeys.PASSED: decision.passed,
        DecisionKeys.REJECTED: rejected,
        DecisionKeys.REJECTIONS: {f"{rs}/{rule}": n for (rs, rule, enforce), n in failures.items() if enforce},
        DecisionKeys.DEADLINE_EXCEEDED: decision.deadline_exceeded,
    }


@dataclass(frozen=True, slots=True)
class RecordLimits:
    segment_bytes: int
    max_bytes: int
    queue: int


class Recorder:
    """Writes answered calls to a recording directory, from a thread of its own."""

    def __init__(self, directory: Path, limits: RecordLimits, idle: Idle, metrics: Metrics) -> None:
        self.directory = directory
        self.limits = limits
        self.idle = idle
        self.metrics = metrics
        self.queue: queue.Queue[Answered] = queue.Queue(limits.queue)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rulesched-recorder", daemon=True)
        self.segment: Segment | None = None
        self.number = 0
        self._closed_bytes = 0

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = segment_files(self.directory)
        self.number = max((int(SEGMENT.match(p.name)[1]) for p in existing), default=0)  # type: ignore[index]
        self._closed_bytes = sum(p.stat().st_size for p in existing)
        self.metrics.recording_bytes.set_function(self.bytes)
        self.thread.start()

    def bytes(self) -> float:
        """Bytes the segments take, the one being written included."""
        segment = self.segment
        return float(self._closed_bytes + (segment.size() if segment is not None else 0))

    def submit(self, answered: Answered) -> None:
        """Queue the call for writing, or leave it out (counted) when the queue is full."""
        try:
            self.queue.put_nowait(answered)
        except queue.Full:
            self.metrics.recorded.labels("dropped").inc()

    def stop(self) -> None:
        """Write what is queued, close the segment and end the thread."""
        self.stopping.set()
        self.thread.join(10)

    def _run(self) -> None:
        flushed = time.monotonic()
        while True:
            try:
                answered = self.queue.get(timeout=0.2)
            except queue.Empty:
                if self.stopping.is_set():
                    break
                if self.segment is not None and time.monotonic() - flushed > _FLUSH_SECONDS:
                    self.segment.flush()  # a reader sees every call up to a pause in the traffic
                    flushed = time.monotonic()
                continue
            if not self.stopping.is_set():
                self.idle.wait(self.stopping)
            self._write(answered)
        if self.segment is not None:
            self._close()

    def _write(self, answered: Answered) -> None:
        try:
            if self.segment is None:
                self.number += 1
                self.segment = Segment(self.directory / segment_name(self.number), self.number)
            self.segment.write(answered)
            self.metrics.recorded.labels("written").inc()
            if self.segment.written >= self.limits.segment_bytes:
                self._close()
        except (OSError, TypeError, ValueError) as error:  # a full disk never stops the extender
            log.error("recording %s failed: %s; the call is left out", self.directory, error)
            self.metrics.recorded.labels("dropped").inc()

    def _close(self) -> None:
        assert self.segment is not None
        self.segment.close()
        self.segment = None
        self._cap()

    def _cap(self) -> None:
        """Delete the oldest segments while the recording takes more than `--record-max-bytes` on disk."""
        segments = segment_files(self.directory)
        sizes = {p: p.stat().st_size for p in segments}
        total = sum(sizes.values())
        for path in segments:
            if total <= self.limits.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= sizes[path]
            log.info("recording: deleted %s (over --record-max-bytes)", path.name)
        self._closed_bytes = total
