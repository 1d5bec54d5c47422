"""The field types of the Kubernetes kinds rules read (Pod, Node, Namespace), written from the `kubernetes`
client's models into the compact table the rules' type check reads (`rules/cel/kubernetes_types.json`).

The client is generated from Kubernetes' OpenAPI document, so each model's `openapi_types` and
`attribute_map` are the schema's fields, their JSON names and their types. The table is written once, when the
pinned client changes
(`python -m rulesched.cluster.kube.kubernetes_types > rulesched/rules/cel/kubernetes_types.json`),
so that loading rules never imports the client; `tests/rules/test_typecheck_schema.py` fails while the
table and the installed client disagree.

Types are written as the rules see the JSON: a date-time, bytes, and a Quantity are strings, a field the
schema leaves open (`object`: IntOrString, RawExtension) is `dyn`, a map is `map(V)` (keys are strings).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import kubernetes
from kubernetes.client import models

ROOTS = {"Pod": "V1Pod", "Node": "V1Node", "Namespace": "V1Namespace"}
"""The kinds rules read, by the model that describes each."""
_SCALARS = {"str": "string", "int": "int", "float": "double", "bool": "bool", "datetime": "string", "bytes": "string"}
_LIST = re.compile(r"List\[(.*)\]")
_DICT = re.compile(r"Dict\[str, (.*)\]")


def _type(text: str, pending: list[str]) -> str:
    """The table's type for a model's type text (`List[V1Container]` → `list(V1Container)`)."""
    if text in _SCALARS:
        return _SCALARS[text]
    if (found := _LIST.fullmatch(text)) is not None:
        return f"list({_type(found[1], pending)})"
    if (found := _DICT.fullmatch(text)) is not None:
        return f"map({_type(found[1], pending)})"
    if hasattr(models, text):
        pending.append(text)
        return text
    return "dyn"  # `object`: a field the schema leaves open


def table() -> dict[str, Any]:
    """Every model reachable from `ROOTS`, each a map of JSON field names to types, with the versions."""
    types: dict[str, dict[str, str]] = {}
    pending = list(ROOTS.values())
    while pending:
        name = pending.pop()
        if name in types:
            continue
        model = getattr(models, name)
        types[name] = {
            model.attribute_map[attribute]: _type(text, pending) for attribute, text in model.openapi_types.items()
        }
    doc = models.V1Pod.__doc__ or ""
    release = re.search(r"release-(\d+\.\d+)", sys.modules[models.V1Pod.__module__].__doc__ or doc)
    return {
        "kubernetes": release[1] if release else "unknown",
        "client": kubernetes.__version__,
        "roots": ROOTS,
        "types": dict(sorted(types.items())),
    }


def text() -> str:
    """The table as the file holds it: one line per model, so that a change of the client reads as a diff."""
    found = table()
    lines = [f"  {json.dumps(name)}: {json.dumps(fields, sort_keys=True)}" for name, fields in found["types"].items()]
    head = {key: found[key] for key in ("kubernetes", "client", "roots")}
    return (
        "{\n"
        + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
        + ('  "types": {\n' + ",\n".join("  " + line for line in lines) + "\n  }\n}\n")
    )


if __name__ == "__main__":
    sys.stdout.write(text())
