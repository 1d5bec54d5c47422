"""The settings reference, generated from the `Settings` model: `docs/operations/configuration.md`.

`rulesched config reference > docs/operations/configuration.md` writes it; a test fails when the page
differs, so a setting's flag, variable, default and meaning are written in one place, the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from rulesched.cli.serve import env_var, field_type, flags, shown_default
from rulesched.settings import COMMA_SEPARATED, Settings

INTRO = """\
# Configuration

Every setting of `rulesched serve`, from the settings model (`rulesched/settings.py`). Each has a flag
and an environment variable; a flag wins over the variable, which wins over the default. The same list,
with the same words, is in `rulesched serve --help`.

This page is generated: `rulesched config reference > docs/operations/configuration.md` rewrites it, and
the tests fail when it differs from the model.

| flag | environment variable | default | values | what it does |
|---|---|---|---|---|
"""

_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
_NAMES = {bool: "true or false", int: "integer", float: "number", str: "text"}


def configuration_reference() -> str:
    """The whole page, Markdown."""
    return INTRO + "".join(_row(name, field) for name, field in Settings.model_fields.items())


def _row(name: str, field: FieldInfo) -> str:
    cells = (
        ", ".join(f"`{flag}`" for flag in flags(name)),
        f"`{env_var(name)}`",
        "none" if field.default in (None, ()) else f"`{shown_default(field)}`",
        values(name, field),
        " ".join((field.description or "").split()),
    )
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n"


def values(name: str, field: FieldInfo) -> str:
    """What the setting accepts: its choices, or its type and bounds."""
    kind = field_type(field)
    if get_origin(kind) is Literal:
        return ", ".join(f"`{choice}`" for choice in get_args(kind))
    if get_origin(kind) is tuple:
        item = "path" if get_args(kind)[0] is Path else "text"
        variable = "comma-separated" if name in COMMA_SEPARATED else "a JSON array"
        return f"{item}, repeatable (the variable: {variable})"
    bounds = [f"{sign} {getattr(m, key)}" for m in field.metadata for key, sign in _BOUNDS.items() if hasattr(m, key)]
    name = _NAMES.get(kind, "path" if getattr(kind, "__name__", "") == "Path" else str(kind))
    return " ".join([name, ", ".join(bounds)]).strip()
