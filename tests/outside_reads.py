"""A guard that fails any test reading files beside the repository instead of inside it.

The suite must pass in a plain `git clone`, where nothing lies beside the checkout (in our own
workspaces a `../shared` folder does, which is how reads of it went unnoticed). An audit hook sees every
`open`, `os.listdir` and `os.scandir`; a path under the repository's parent folder but outside the
repository is recorded, and the test that made it fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.paths import REPO

_PARENT = str(REPO.parent) + os.sep
_INSIDE = str(REPO) + os.sep
_AUDITED = frozenset({"open", "os.listdir", "os.scandir"})
_TEMP = tempfile.gettempdir()
_EXEMPT = (
    *(os.path.join(os.path.normpath(p), "") for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}),
    os.path.join(_TEMP, "pytest-of-"),
    *((os.path.join(_TEMP, "tmp"),) if os.path.normpath(_TEMP) == os.path.normpath(REPO.parent) else ()),
)
"""The interpreter's own folders (a virtual environment beside the checkout), pytest's `tmp_path` folders
and, when the repository is cloned straight into the temporary folder, the files `tempfile` makes there
(the kubernetes client writes its CA bundle to one)."""
recorded: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event not in _AUDITED or not args or not isinstance(args[0], str | bytes | os.PathLike):
        return
    path = os.fsdecode(args[0])
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    path = os.path.normpath(path)
    if path.startswith(_PARENT) and not (path + os.sep).startswith(_INSIDE) and not path.startswith(_EXEMPT):
        recorded.append(path)


def install() -> None:
    """Start recording (an audit hook cannot be removed: install once per process)."""
    sys.addaudithook(_audit)


def take() -> list[str]:
    """The outside paths read since the last call, and forget them."""
    found = sorted(set(recorded))
    recorded.clear()
    return found


def describe(paths: list[str]) -> str:
    shown = ", ".join(str(Path(p)) for p in paths[:5])
    return f"read outside the repository ({shown}); copy what a test needs into tests/fixtures/"
