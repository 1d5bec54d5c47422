"""Log output: JSON lines for log pipelines (the default) or plain text for people."""

from __future__ import annotations

import datetime
import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "color_message"}


def json_line(created: float, level: str, logger: str, message: str, fields: Mapping[str, Any]) -> str:
    """One JSON log line: time, level, logger, message, then `fields`."""
    entry: dict[str, Any] = {
        "time": datetime.datetime.fromtimestamp(created, datetime.UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "logger": logger,
        "message": message,
    }
    entry.update(fields)
    return orjson.dumps(entry, default=str).decode()


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and every `extra` field."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return json_line(record.created, record.levelname.lower(), record.name, record.getMessage(), fields)


def direct_info(logger: logging.Logger) -> Callable[[str, Mapping[str, Any]], None] | None:
    """A function that writes an info line of `logger` (its message, then its fields) exactly as the logging
    set up by `configure_logging` would, without the logging machinery (a record made, handlers called):
    for the decision line of every filter and prioritize call. None when the line would go anywhere else
    (another handler or a filter added, the text format, info lines off): then log it as usual."""
    root = logging.getLogger()
    handlers = root.handlers
    if len(handlers) != 1 or logger.handlers or logger.filters or not logger.propagate:
        return None
    handler = handlers[0]
    if (
        type(handler) is not StderrHandler
        or type(handler.formatter) is not JsonFormatter
        or handler.filters
        or root.filters
        or handler.level > logging.INFO
        or not logger.isEnabledFor(logging.INFO)
    ):
        return None
    name, lock = logger.name, handler.lock

    def write(message: str, fields: Mapping[str, Any]) -> None:
        line = json_line(time.time(), "info", name, message, fields) + "\n"
        if lock is None:
            sys.stderr.write(line)
            return
        with lock:  # as the handler writes: lines from other threads never interleave with it
            sys.stderr.write(line)

    return write


class TextFormatter(logging.Formatter):
    """`time level logger: message key=value …`, extras appended as JSON values."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        if extras:
            text += " " + " ".join(f"{k}={orjson.dumps(v, default=str).decode()}" for k, v in extras.items())
        return text


class StderrHandler(logging.StreamHandler[Any]):
    """Writes to whatever `sys.stderr` is when a record is emitted, not when the handler was made."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(level: str, fmt: str) -> None:
    """Send every logger (ours, uvicorn's, the kubernetes client's) through one formatted handler.

    Neither format shows where a call was made from, nor the thread or process: logging is told not to
    find them (the logging HOWTO's "Optimization"), which under a server's deep call stacks was most of
    the cost of the decision line written for every filter and prioritize call."""
    logging._srcfile = None  # documented: skip finding the caller
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
