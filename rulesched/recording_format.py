"""What names a recording and its segments (docs/operations/recording.md): the format's name and version, a
segment's file name, and every record type and key, shared by the writer on the HTTP edge
(`extender/recording.py`) and the readers of `rulesched replay` (`tools/recording_read.py`, `tools/replay/`),
which stand on no part of the edge. A key is spelled here once; the writer and the readers use these names.
"""

from __future__ import annotations

import re
from typing import Final

FORMAT = "rulesched-recording"
VERSION = 1
"""The recording format version this rulesched writes (and the newest it reads)."""
SEGMENT = re.compile(r"segment-(\d{6,})\.jsonl(\.gz)?$")
"""A segment's file name, with its number."""


class Kind:
    """A record's `type`."""

    HEADER: Final = "header"
    NODE: Final = "node"
    PODS: Final = "pods"
    CONTEXT: Final = "context"
    POD: Final = "pod"
    NAMESPACE: Final = "namespace"
    CALL: Final = "call"


class Keys:
    """The keys every record has (`TYPE`), and those of the objects referred to by id (`node`, `pod`,
    `namespace`: `ID`, `OBJECT`)."""

    TYPE: Final = "type"
    ID: Final = "id"
    OBJECT: Final = "object"


class HeaderKeys:
    """A segment's first line, beside its `type`."""

    FORMAT: Final = "format"
    VERSION: Final = "version"
    RULESCHED: Final = "rulesched"
    """The rulesched version that wrote the segment."""
    SEGMENT: Final = "segment"
    STARTED: Final = "started"


class PodsKeys:
    """A `pods` record: the pods on one node as the rules saw them."""

    NODE: Final = "node"
    PODS: Final = "pods"
    ALLOCATED: Final = "allocated"
    RECENT: Final = "recent"
    RECENT_UIDS: Final = "recentUids"


class NodeContextKeys:
    """A `context` record: a node, its metrics and its pods (`node` and `pods` ids)."""

    NAME: Final = "name"
    NODE: Final = "node"
    METRICS: Final = "metrics"
    PODS: Final = "pods"


class CallKeys:
    """A `call` record."""

    VERB: Final = "verb"
    MODE: Final = "mode"
    NOW: Final = "now"
    POD: Final = "pod"
    NAMESPACE: Final = "namespace"
    CANDIDATES: Final = "candidates"
    UNKNOWN: Final = "unknown"
    RULES: Final = "rules"
    """The live rule book's `GENERATION` and `HASH`."""
    GENERATION: Final = "generation"
    HASH: Final = "hash"
    ESTIMATE: Final = "estimate"
    DECISION: Final = "decision"


class DecisionKeys:
    """A call's `decision`: filter's `PASSED`, `REJECTED` and `REJECTIONS`, prioritize's `SCORES`, both's
    `DEADLINE_EXCEEDED`."""

    PASSED: Final = "passed"
    REJECTED: Final = "rejected"
    REJECTIONS: Final = "rejections"
    SCORES: Final = "scores"
    DEADLINE_EXCEEDED: Final = "deadlineExceeded"
