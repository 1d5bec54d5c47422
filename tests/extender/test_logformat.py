"""The decision line written without the logging machinery is the line logging writes."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from rulesched.extender.logformat import StderrHandler, configure_logging, direct_info

FIELDS = {"pod": {"namespace": "default", "name": "p", "uid": "u"}, "verb": "filter", "candidates": 3, "top": []}


@pytest.fixture
def json_logging() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging("info", "json")
    try:
        yield logging.getLogger("rulesched.decision")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_a_direct_decision_line_is_the_line_logging_writes(
    json_logging: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    root.handlers[:] = [h for h in handlers if isinstance(h, StderrHandler)]  # without pytest's own
    try:
        direct = direct_info(json_logging)
        assert direct is not None
        direct("filter default/p: 1 of 3 nodes passed", FIELDS)
        json_logging.info("%s %s/%s: %d of %d nodes passed", "filter", "default", "p", 1, 3, extra=FIELDS)
    finally:
        root.handlers[:] = handlers
    written, logged = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert written.pop("time")[:16] == logged.pop("time")[:16]
    assert list(written) == list(logged)
    assert written == logged


def test_lines_go_through_logging_when_anything_else_would_see_them(
    json_logging: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="rulesched.decision"):
        assert direct_info(json_logging) is None, "a handler was added: it must get the record"
    configure_logging("info", "text")
    assert direct_info(json_logging) is None
    configure_logging("warning", "json")
    assert direct_info(json_logging) is None
