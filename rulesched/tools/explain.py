"""`rulesched explain`: why a pod would land where it lands, rule by rule and node by node.

`Decision.explain(pod)` is the one shape of an explanation: the server's `POST /explain` answers it, the
local mode builds it from the same evaluation as the server (`inputs.decide`), and both outputs
(JSON, table) are printed from it. In server mode the report comes from a running extender.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rulesched.rules.book import RuleBook
from rulesched.rules.cel import EngineName, make_engine
from rulesched.rules.context import context_report
from rulesched.rules.estimate import fallback_estimate
from rulesched.rules.loader import load_rule_book
from rulesched.tools.inputs import SourceFiles, Sources, decide, file_contexts, namespace_of

SERVER_TIMEOUT = 30.0
"""Seconds to wait for the server's answer."""


class ExplainError(Exception):
    """The server could not be asked or answered badly; the message says what to do."""


def explain_local(
    rules: Sequence[Path],
    engine: EngineName,
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    files: SourceFiles,
) -> dict[str, Any]:
    """The report of the server's evaluation, run here on the given files (raises on bad input)."""
    book = load_rule_book(list(rules), make_engine(engine))
    return explained(book, pod, nodes, files.read())


def explained(
    book: RuleBook, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], sources: Sources
) -> dict[str, Any]:
    """The report of `book`'s decision for `pod` over `nodes`, with the cluster context the sources give."""
    built = file_contexts(sources.metrics, sources.pods)
    contexts = built.for_objects(nodes)
    decision = decide(book, pod, nodes, sources)
    estimate = fallback_estimate(pod)  # no usage store offline: the default fallback, as a server without one
    namespace = namespace_of(pod, sources.namespaces)
    return decision.explain(pod) | context_report(pod, namespace, contexts, built.custom_ages, estimate)


def extender_args(
    pod: Mapping[str, Any], names: Sequence[str] | None, nodes: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """The ExtenderArgs body kube-scheduler would send: names mode, or full mode with the nodes."""
    if nodes is not None:
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None}
    return {"Pod": pod, "Nodes": None, "NodeNames": list(names or [])}


def explain_remote(
    url: str, body: Mapping[str, Any], timeout: float = SERVER_TIMEOUT, *, book: str = "live"
) -> dict[str, Any]:
    """POST `body` to the server's /explain and return its report: the live rules' decision, or with
    `book="shadow"` the shadow rules' (`rulesched serve --shadow-rules`)."""
    target = url.rstrip("/") + "/explain" + ("?book=shadow" if book == "shadow" else "")
    request = urllib.request.Request(
        target, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
    except urllib.error.HTTPError as error:
        raise ExplainError(_http_error(target, error)) from error
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ExplainError(f"cannot reach {target}: {reason}; is `rulesched serve` running there?") from error
    return _report(target, answer)


def _http_error(target: str, error: urllib.error.HTTPError) -> str:
    detail = error.read().decode("utf-8", "replace").strip()
    if error.code == 404 and "shadow" in detail:
        return f"{target} answered 404: the server has no shadow rules; start it with --shadow-rules DIR"
    if error.code == 404:
        return f"{target} answered 404: explain is disabled; start the server with --enable-explain"
    return f"{target} answered HTTP {error.code}" + (f": {detail[:500]}" if detail else "")


def _report(target: str, answer: bytes) -> dict[str, Any]:
    try:
        report = json.loads(answer)
    except ValueError as error:
        raise ExplainError(f"{target} answered something that is not JSON: {answer[:200]!r}") from error
    if not isinstance(report, dict) or not isinstance(report.get("nodes"), list):
        raise ExplainError(f"{target} answered JSON that is not an explain report")
    return report
