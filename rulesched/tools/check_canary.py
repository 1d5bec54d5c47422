"""`rulesched check --nodes`/`--recording`: the reload canary run offline, on files instead of a live cluster.

The calls tried are each pod of `--pods` (the stand-in pod without it) over the nodes of `--nodes`, with the
metrics, the pods on each node and the namespaces of the files given, and the latest calls of a recording
(`--recording`: each recorded pod over the nodes its call saw). A rule the canary names fails the check.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from rulesched.cluster.sources import SourceError, items_of
from rulesched.decide.canary import Verdict, canary, trials
from rulesched.decide.verbs import Call
from rulesched.rules.book import RuleBook
from rulesched.tools.inputs import InputError, SourceFiles, file_contexts, namespace_of, read_nodes
from rulesched.tools.recording_read import Recording, RecordingError, read_calls


class CanaryFiles(NamedTuple):
    """What `check` tries the rules on (nothing: the canary does not run)."""

    nodes: Path | None = None
    sources: SourceFiles = SourceFiles()
    """The metrics, the pods (tried, and counted on their nodes) and the namespaces."""
    recording: Path | None = None
    sample: int = 64
    """The most pods of `--pods`, and of the recording's latest calls, tried."""
    seconds: float = 30.0

    def given(self) -> bool:
        return self.nodes is not None or self.recording is not None


def calls(files: CanaryFiles) -> list[Call]:
    """The calls tried. Raises InputError or RecordingError for a file that cannot be read."""
    found: list[Call] = []
    if files.nodes is not None:
        sources = files.sources.read()
        contexts = file_contexts(sources.metrics, sources.pods).for_objects(read_nodes(files.nodes))
        pods = _pods(files.sources.pods)[: files.sample]
        found += trials(pods, contexts, lambda pod: namespace_of(pod, sources.namespaces))
    if files.recording is not None:
        recorded = collections.deque(read_calls(Recording(files.recording)), maxlen=files.sample)
        found += [Call(c.pod, c.contexts, now=c.now, namespace=c.namespace, estimate=c.estimate) for c in recorded]
    return found


def _pods(path: Path | None) -> list[Mapping[str, Any]]:
    if path is None:
        return []
    try:
        return items_of(path, "PodList")
    except SourceError as error:
        raise InputError(str(error)) from error


def run(book: RuleBook, files: CanaryFiles, err: TextIO) -> int:
    """0 when the canary names no rule; else each rule named, one per line, and 1 (2: a file unread)."""
    try:
        tried = calls(files)
    except (InputError, RecordingError) as error:
        print(f"error: {error}", file=err)
        return 2
    verdict = canary(book, tried, time.monotonic() + files.seconds)
    return _report(verdict, len(tried), err)


def _report(verdict: Verdict, asked: int, err: TextIO) -> int:
    for finding in verdict.findings:
        print(finding, file=err)
    if verdict.tried < asked:
        print(f"warning: the canary tried {verdict.tried} of {asked} calls in its time", file=err)
    if verdict.findings:
        print(f"{len(verdict.findings)} rule(s) refused by the canary; nothing would be loaded", file=err)
        return 1
    return 0
