"""`rulesched serve`: its flags are generated from the `Settings` fields, so each is declared once.

A field `max_body_bytes` becomes `--max-body-bytes`; its docstring is the help, its default is shown
from the model, and its type gives the parsing (a bool is `--x`/`--no-x`, a Literal a choice). A flag
left out is absent from the parsed arguments, so the `RULESCHED_*` variable or the default applies.
A few fields keep the shorter flag they were documented with (`--rules`); their long form works too.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from rulesched.settings import Settings

SHORT_FLAGS = {
    "rules_dir": "--rules",
    "nodes_file": "--nodes",
    "metrics_file": "--metrics",
    "pods_file": "--pods",
    "namespaces_file": "--namespaces",
    "tls_client_names": "--tls-client-name",
    "shadow_rules_dir": "--shadow-rules",
    "record_dir": "--record",
}
"""Fields whose documented flag is not their name."""


def flags(name: str) -> list[str]:
    """The flags of the field `name`: the documented one first."""
    long = "--" + name.replace("_", "-")
    return [SHORT_FLAGS[name], long] if name in SHORT_FLAGS else [long]


def field_type(field: FieldInfo) -> Any:
    """The field's annotation without `| None` (and without `Annotated`'s metadata, which pydantic keeps apart)."""
    annotation = field.annotation
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        annotation = kept[0] if len(kept) == 1 else annotation
    return annotation


def env_var(name: str) -> str:
    return f"{Settings.model_config.get('env_prefix', '')}{name}".upper()


UNITS = {
    "loop_work": "MICROSECONDS",
    "shadow_inline_work": "MICROSECONDS",
    "requeue_rate": "PER_SECOND",
    "deschedule_rate": "PER_MINUTE",
    "usage_quantile": "NUMBER",
    "usage_fallback_factor": "NUMBER",
}
"""What the number of a float field that is not seconds is (the others are: `SECONDS`)."""


def shown_default(field: FieldInfo) -> str:
    """The field's default as a user writes it: `none`, `true`/`false`, `""`, a whole number without `.0`, a
    list comma-separated, or the value."""
    default = field.default
    if default is None or default == ():
        return "none"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    if isinstance(default, tuple):
        return ",".join(map(str, default))
    return str(default) if default != "" else '""'


class _HelpFormatter(argparse.HelpFormatter):
    """Shows each setting's default (from the model) and environment variable after its docstring."""

    def _get_help_string(self, action: argparse.Action) -> str:
        field = Settings.model_fields.get(action.dest)
        text = action.help or ""
        if field is None:
            return text
        return f"{text} [default: {shown_default(field)}; env {env_var(action.dest)}]".replace("%", "%%")


def _argument(name: str, field: FieldInfo) -> dict[str, Any]:
    """How argparse reads the field: its action, type or choices."""
    kind = field_type(field)
    if kind is bool:
        return {"action": argparse.BooleanOptionalAction}
    if get_origin(kind) is Literal:
        return {"choices": get_args(kind)}
    if get_origin(kind) is tuple:  # a list of values: the flag is repeated
        item = get_args(kind)[0]
        return {"action": "append", "type": item, "metavar": _metavar(name, item)}
    return {"type": kind if kind in (int, float, Path) else str, "metavar": _metavar(name, kind)}


def _metavar(name: str, kind: Any) -> str:
    if kind is float:
        return UNITS.get(name, "SECONDS")
    return {int: "N", Path: "PATH"}.get(kind, "TEXT")


def add(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the extender (HTTP) serving the rules",
        description="Every flag can also be set by its RULESCHED_* environment variable; a flag wins.",
        formatter_class=_HelpFormatter,
    )
    for name, field in Settings.model_fields.items():
        serve.add_argument(
            *flags(name), dest=name, default=argparse.SUPPRESS, help=field.description, **_argument(name, field)
        )
    serve.set_defaults(run=run)


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings: the flags given, then the environment, then the defaults. Raises ValidationError."""
    overrides = {name: value for name, value in vars(args).items() if name in Settings.model_fields}
    return Settings(**overrides)


def run(args: argparse.Namespace) -> int:
    from rulesched.extender.server import serve

    try:
        settings = settings_from(args)
    except ValidationError as error:
        for line in settings_errors(error):
            print(f"rulesched: {line}", file=sys.stderr)
        return 2
    return serve(settings)


def settings_errors(error: ValidationError) -> list[str]:
    """One line per problem: `--flag: why` for a bad value; for contradictory flags (the model validator
    of Settings), each sentence on its own line."""
    lines = []
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["loc"]:
            lines.append(f"{flags(str(item['loc'][0]))[0]}: {message}")
        else:
            lines.extend(message.split("; "))
    return lines
