"""JSON Schemas of the documents rulesched reads, generated from the pydantic models that validate them.

An editor (yaml-language-server, VS Code's YAML extension) completes and checks a rule file with them
(docs/guides/editor.md); `rulesched schema KIND` prints one and `schemas/` holds them all, equal to what
this module makes (tests/tools/test_schemas.py). A schema may accept more than the loader (a validator over
several fields, a URL's parts, a CEL expression's meaning are for `rulesched check`), but it never rejects
a document the loader takes: where pydantic's lax mode takes a string for a number or a time, so does
the schema.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from rulesched.rules.metricsource import MetricSource
from rulesched.rules.model import RuleSet
from rulesched.tools.recording_read import Header
from rulesched.tools.ruletest.model import RuleTest

DIALECT = "http://json-schema.org/draft-07/schema#"
"""Draft 7: what every editor and JSON Schema library reads (the keywords pydantic writes are all in it)."""
MODELS: dict[str, type[BaseModel]] = {
    "RuleSet": RuleSet,
    "MetricSource": MetricSource,
    "RuleTest": RuleTest,
    "RecordingHeader": Header,
}
RULE_FILE = "RuleFile"
"""A document of a rules directory: a RuleSet or a MetricSource, told apart by `kind`."""
KINDS = (RULE_FILE, *MODELS)
FILES = {kind: f"{kind.lower()}.json" for kind in KINDS}
"""Each schema's file name under schemas/."""

_LAX_INTEGER = r"^\s*[+-]?[0-9]+\s*$"


class _Lenient(GenerateJsonSchema):
    """pydantic's schema, widened where the models' lax mode accepts more than the JSON type says."""

    def int_schema(self, schema: core_schema.IntSchema) -> JsonSchemaValue:
        number = super().int_schema(schema)
        if schema.get("strict"):
            return number
        return {"anyOf": [number, {"type": "string", "pattern": _LAX_INTEGER}]}

    def datetime_schema(self, schema: core_schema.DatetimeSchema) -> JsonSchemaValue:
        # pydantic takes RFC 3339 with or without a zone, a bare date and Unix seconds; a YAML editor
        # sees an unquoted timestamp as a string.
        return {"anyOf": [{"type": "string"}, {"type": "number"}]}


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of one document kind (one of KINDS)."""
    if kind == RULE_FILE:
        return _rule_file()
    model = MODELS[kind]
    found = model.model_json_schema(schema_generator=_Lenient)
    return {"$schema": DIALECT, "$id": FILES[kind], **found}


def _rule_file() -> dict[str, Any]:
    """RuleSet or MetricSource by `kind`: `if`/`then`, so an editor checks each against its own schema."""
    parts = {kind: schema_of(kind) for kind in ("RuleSet", "MetricSource")}
    definitions: dict[str, Any] = {}
    branches = []
    for kind, schema in parts.items():
        definitions.update(schema.pop("$defs", {}))
        schema.pop("$schema")
        schema.pop("$id")
        definitions[kind] = schema
        when = {"properties": {"kind": {"const": kind}}, "required": ["kind"]}
        branches.append({"if": when, "then": {"$ref": f"#/$defs/{kind}"}})
    return {
        "$schema": DIALECT,
        "$id": FILES[RULE_FILE],
        "title": RULE_FILE,
        "description": "One document of a rules directory: a RuleSet or a MetricSource.",
        "type": "object",
        "required": ["apiVersion", "kind"],
        "properties": {"kind": {"enum": list(parts)}},
        "allOf": branches,
        "$defs": definitions,
    }


def render(kind: str) -> str:
    """The schema as the file in schemas/ holds it."""
    return json.dumps(schema_of(kind), indent=2, sort_keys=False) + "\n"
