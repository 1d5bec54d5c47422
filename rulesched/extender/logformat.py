"""Log output: JSON lines for log pipelines (the default) or plain text for people."""

from __future__ import annotations

import datetime
import logging
import sys
from typing import Any

import orjson

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and every `extra` field."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


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
