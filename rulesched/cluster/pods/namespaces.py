"""The namespaces given once (a NamespaceList file, or those `rulesched explain` read): what `namespaceObject`
reads when no namespace cache runs. The live cache is `podcache.py`'s; both answer `index.NamespaceSource`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rulesched.cluster.sources import SourceError, items_of
from rulesched.rules.pod_values import namespace_view


def namespaces_by_name(items: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Namespaces by name, each trimmed to what `namespaceObject` shows."""
    found: dict[str, Mapping[str, Any]] = {}
    for item in items:
        view = namespace_view({}, item)
        name = view["metadata"]["name"]
        if name:
            found[name] = view
    return found


class KnownNamespaces:
    """Namespaces given once (a file's, or those `rulesched explain` read): a source that never changes."""

    def __init__(self, items: Iterable[Mapping[str, Any]]) -> None:
        self._namespaces = namespaces_by_name(items)

    def get(self, name: str) -> Mapping[str, Any] | None:
        return self._namespaces.get(name)

    def ready(self) -> bool:
        return True

    def size(self) -> int:
        return len(self._namespaces)

    def start(self) -> None: ...

    def stop(self) -> None: ...


class FileNamespaceSource(KnownNamespaces):
    """Namespaces from a NamespaceList file (`--namespaces`): the offline namespace source."""

    def __init__(self, path: Path) -> None:
        super().__init__(items_of(path, "NamespaceList"))
        self.path = path
        if not self._namespaces and items_of(path, "NamespaceList"):
            raise SourceError(f"{path}: every namespace needs metadata.name")
