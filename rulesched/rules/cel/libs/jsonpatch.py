"""Kubernetes' JSON Patch library (k8s.io/apiserver/pkg/cel/library/jsonpatch.go): `jsonpatch.escapeKey`,
a key made safe for a JSON Pointer path (RFC 6901: `~` → `~0`, `/` → `~1`)."""

from __future__ import annotations

from rulesched.rules.cel.library import Overload, global_


def escape_key(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


OVERLOADS: tuple[Overload, ...] = (global_("jsonpatch.escapeKey", ("string",), "string", escape_key),)
