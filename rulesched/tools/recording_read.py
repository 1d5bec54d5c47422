"""Reading a recording (`rulesched serve --record DIR`): its calls, each with the node contexts it saw.

A recording is a directory of segments (or one segment file), each a JSON Lines file, gzip-compressed
or not, that starts with a header naming the format and its version (docs/operations/recording.md).
A segment of a version this rulesched does not read is refused with a message that says which version
it is and what to do. The segment being written when the recording was copied may end in the middle of
a line: what comes before is read, and the report says the segment was cut short.
"""

from __future__ import annotations

import datetime
import gzip
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rulesched.recording_format import (
    FORMAT,
    SEGMENT,
    VERSION,
    CallKeys,
    HeaderKeys,
    Keys,
    Kind,
    NodeContextKeys,
    PodsKeys,
)
from rulesched.rules.context import NO_CUSTOM, ContextKey, NodeContext, NodePods, allocatable_numbers

READS = frozenset({1})
"""The recording format versions this rulesched reads."""


class Header(BaseModel):
    """The first line of every segment (docs/operations/recording.md); later fields a newer minor change adds
    are allowed, as a reader skips what it does not know."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["header"]
    format: Literal["rulesched-recording"]
    version: Annotated[int, Field(strict=True)]
    rulesched: str | None = None
    """The rulesched version that wrote the segment."""
    segment: Annotated[int, Field(strict=True, ge=1)] | None = None
    started: str | None = None
    """When the segment was begun (RFC 3339)."""


class RecordingError(Exception):
    """A recording that cannot be replayed; the message names the file, the line and what to do."""


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded filter or prioritize call."""

    verb: str
    mode: str
    pod: Mapping[str, Any]
    contexts: list[NodeContext]
    unknown: Mapping[str, str]
    namespace: Mapping[str, Any] | None
    now: datetime.datetime
    rules: Mapping[str, Any]
    decision: Mapping[str, Any]
    where: str
    """`segment:line`, for messages."""
    estimate: Mapping[str, float] | None = None
    """The pod's `estimate` the live rules saw (None: not recorded, the fallback)."""


@dataclass
class Recording:
    """What was read: the segments and how many were cut short."""

    path: Path
    segments: list[Path] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    calls: int = 0


def segments_of(path: Path) -> list[Path]:
    """The segment files of a recording directory, oldest first; a file is a recording of one segment."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise RecordingError(f"{path}: no such recording (a directory written by `rulesched serve --record`)")
    found = sorted((int(m[1]), p) for p in path.iterdir() if (m := SEGMENT.match(p.name)) and p.is_file())
    if not found:
        raise RecordingError(f"{path}: no recording segments in it (segment-NNNNNN.jsonl.gz)")
    return [p for _, p in found]


def read_calls(recording: Recording) -> Iterator[Call]:
    """Every call of the recording, in order."""
    recording.segments = segments_of(recording.path)
    for segment in recording.segments:
        reader = _SegmentReader(segment)
        for call in reader.calls():
            recording.calls += 1
            yield call
        if reader.truncated:
            recording.truncated.append(segment.name)


def _open(path: Path) -> IO[bytes]:
    """The segment's lines: gzip-compressed (as written) or not (as a person may keep one)."""
    with path.open("rb") as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if compressed else path.open("rb")  # type: ignore[return-value]


def check_header(header: Any, where: str) -> None:
    """Refuse a segment whose header is not a rulesched recording's of a version read here."""
    is_header = isinstance(header, Mapping) and header.get(Keys.TYPE) == Kind.HEADER
    if not is_header or header.get(HeaderKeys.FORMAT) != FORMAT:
        raise RecordingError(f"{where}: not a rulesched recording (its first line is not a {FORMAT} header)")
    version = header.get(HeaderKeys.VERSION)
    if version in READS:
        try:
            Header.model_validate(header)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(map(str, first["loc"]))
            raise RecordingError(f"{where}: invalid recording header: {field}: {first['msg']}") from None
        return
    made_by = f" (written by rulesched {header[HeaderKeys.RULESCHED]})" if header.get(HeaderKeys.RULESCHED) else ""
    if isinstance(version, int) and version > VERSION:
        raise RecordingError(
            f"{where}: recording format version {version}{made_by} is newer than this rulesched reads "
            f"(version {VERSION}): replay it with that rulesched version or a newer one"
        )
    raise RecordingError(
        f"{where}: recording format version {version!r}{made_by} is not one this rulesched reads "
        f"(versions {', '.join(map(str, sorted(READS)))}): record again with this version"
    )


class _SegmentReader:
    """One segment: its records by id, and its calls with their contexts rebuilt."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.objects: dict[str, Any] = {}
        self.contexts: dict[str, NodeContext] = {}
        self.truncated = False

    def lines(self) -> Iterator[tuple[int, Any]]:
        with _open(self.path) as stream:
            number = 0
            try:
                for number, line in enumerate(stream, 1):
                    yield number, self._parse(line, number)
            except (EOFError, zlib.error, gzip.BadGzipFile):
                self.truncated = True
            except _CutShortError:
                self.truncated = True

    def _parse(self, line: bytes, number: int) -> Any:
        try:
            return json.loads(line)
        except ValueError:
            if not line.endswith(b"\n"):
                raise _CutShortError from None
            raise RecordingError(f"{self.path}:{number}: not a JSON line") from None

    def calls(self) -> Iterator[Call]:
        first = True
        for number, record in self.lines():
            if first:
                check_header(record, str(self.path))
                first = False
                continue
            kind = record.get(Keys.TYPE) if isinstance(record, Mapping) else None
            if kind == Kind.CALL:
                yield self._call(record, f"{self.path}:{number}")
            elif kind == Kind.CONTEXT:
                self.contexts[record[Keys.ID]] = self._context(record)
            elif kind in (Kind.NODE, Kind.POD, Kind.NAMESPACE, Kind.PODS):
                self.objects[record[Keys.ID]] = record
            else:  # records a later minor change may add are skipped; an unknown version was refused above
                continue
        if first:
            raise RecordingError(f"{self.path}: empty: not a rulesched recording")

    def _context(self, record: Mapping[str, Any]) -> NodeContext:
        node = self.objects[record[NodeContextKeys.NODE]][Keys.OBJECT]
        pods = self.objects.get(record.get(NodeContextKeys.PODS) or "")
        node_pods = NodePods() if pods is None else _node_pods(pods, record[NodeContextKeys.PODS])
        allocatable = allocatable_numbers((node.get("status") or {}).get("allocatable"))
        name = record[NodeContextKeys.NAME]
        key = ContextKey(name, (self.path.name, record[Keys.ID]), None, 0, NO_CUSTOM)
        return NodeContext(name, node, allocatable, record[NodeContextKeys.METRICS], key, node_pods)

    def _call(self, record: Mapping[str, Any], where: str) -> Call:
        try:
            namespace = record.get(CallKeys.NAMESPACE)
            return Call(
                verb=record[CallKeys.VERB],
                mode=record[CallKeys.MODE],
                pod=self.objects[record[CallKeys.POD]][Keys.OBJECT],
                contexts=[self.contexts[c] for c in record[CallKeys.CANDIDATES]],
                unknown=record.get(CallKeys.UNKNOWN) or {},
                namespace=self.objects[namespace][Keys.OBJECT] if namespace else None,
                now=datetime.datetime.fromisoformat(record[CallKeys.NOW]),
                rules=record.get(CallKeys.RULES) or {},
                decision=record[CallKeys.DECISION],
                where=where,
                estimate=record.get(CallKeys.ESTIMATE),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise RecordingError(f"{where}: a call refers to what its segment lacks ({error})") from error


class _CutShortError(Exception):
    """The last line of a segment that was being written ends mid-line."""


def _node_pods(record: Mapping[str, Any], ref: str) -> NodePods:
    recent = dict(record.get(PodsKeys.RECENT) or {})
    # A recording made before `recent.estimates` existed: the live rules then counted requests, the fallback.
    recent.setdefault("estimates", dict(recent.get("requests") or {"cpu": 0.0, "memory": 0.0}))
    return NodePods(
        list(record.get(PodsKeys.PODS) or []),
        record.get(PodsKeys.ALLOCATED) or {},
        recent,
        ref,
        frozenset(record.get(PodsKeys.RECENT_UIDS) or ()),
    )
