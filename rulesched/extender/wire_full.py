"""Full mode read fast from the exact form kube-scheduler writes (`read_sent`).

Full mode carries every candidate node whole (about 12 KB of JSON each) with every call, though a node
changes far less often than it is sent. A body in the exact form kube-scheduler writes is therefore read
without decoding the nodes seen before (`read_sent`): msgspec reads its envelope and cuts out each
node's JSON text, a text byte for byte the one a node was last decoded from stands for that node's
object (`NodeTexts`), only the others are decoded (orjson, as the plain way), and the answer echoes the
passing nodes' texts as sent. Every other body, and any body in which that way finds anything amiss, is
read the plain way, which gives a bad request its reason: both ways accept the same bodies and read them
alike (`tests/extender/test_wire_full.py`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec
import orjson

JSON = dict[str, Any]

_SENT_END = b'"NodeNames":null}'
"""How kube-scheduler's full-mode body ends (the Go struct's fields in order: Pod, Nodes, NodeNames)."""
_TEXTS_KEPT = 20_000


class _NodeList(msgspec.Struct, forbid_unknown_fields=True):
    metadata: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    items: list[msgspec.Raw] | None = None


class _SentArgs(msgspec.Struct, forbid_unknown_fields=True):
    """ExtenderArgs with the exact keys kube-scheduler writes (any other key: read the plain way)."""

    Pod: msgspec.Raw
    Nodes: _NodeList
    NodeNames: None = None


_SENT = msgspec.json.Decoder(_SentArgs)
_START = 256
"""How many first bytes of a node's text find the node it was last decoded from (its name and
resourceVersion are among them, as Go writes a Node)."""


class NodeTexts:
    """Full-mode nodes as decoded for earlier requests, each with the exact JSON text it was decoded
    from: a node sent again byte for byte is the same object, not decoded again (its context is then
    found by identity). A text is looked up by its length and first bytes, then compared whole. At most
    `_TEXTS_KEPT` names; each keeps its text (about 12 KB a realistic node) beside the object, which its
    node context holds too."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[msgspec.Raw, JSON]] = {}
        self._names: dict[tuple[int, bytes], str] = {}

    def node(self, text: msgspec.Raw) -> tuple[str, JSON] | None:
        """The name and object of the node in `text`; None when it is not an object with a
        `metadata.name` (the plain way says what is wrong). orjson's error when it is not JSON."""
        key = (len(text), bytes(memoryview(text)[:_START]))
        name = self._names.get(key)
        kept = self._kept.get(name) if name is not None else None
        if name is not None and kept is not None and kept[0] == text:
            return name, kept[1]
        node = _decoded(text, 3)  # in the body's object, in Nodes, in items
        metadata = node.get("metadata") if isinstance(node, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name:
            return None
        self._keep(key, name, (text.copy(), node))  # a copy: `text` is a view of the whole request body
        return name, node

    def _keep(self, key: tuple[int, bytes], name: str, kept: tuple[msgspec.Raw, JSON]) -> None:
        if len(self._kept) >= _TEXTS_KEPT:
            self._kept.clear()
            self._names.clear()
        old = self._kept.get(name)
        if old is not None:  # the node's previous text: it finds the node no more
            old_key = (len(old[0]), bytes(memoryview(old[0])[:_START]))
            if self._names.get(old_key) == name:
                del self._names[old_key]
        self._kept[name] = kept
        self._names[key] = name

    def __len__(self) -> int:
        return len(self._kept)


def _decoded(text: msgspec.Raw, depth: int) -> Any:
    """The value in `text` as orjson reads it `depth` arrays or objects deep: its limit on nesting counts
    the levels around the value, and msgspec's (the interpreter's recursion limit, which celpy raises)
    may be higher, so a value is checked at its depth in the body, as the plain way checks it."""
    value = orjson.loads(b"".join((b"[" * depth, text, b"]" * depth)))
    for _ in range(depth):
        value = value[0]
    return value


class Sent(NamedTuple):
    """A full-mode request as read from kube-scheduler's own form."""

    pod: JSON
    nodes: list[JSON]
    texts: list[msgspec.Raw]
    """Each node's JSON text as sent, in order."""
    names: list[str]
    """Each node's name, in order."""


def read_sent(body: bytes, texts: NodeTexts) -> Sent | None:
    """Full mode in the exact form kube-scheduler writes, its nodes found in `texts` when sent unchanged;
    None for any other body, or when anything in it is not as the plain way would accept it."""
    if not body.endswith(_SENT_END):
        return None
    names: list[str] = []
    nodes: list[JSON] = []
    try:
        sent = _SENT.decode(body)
        pod = _decoded(sent.Pod, 1)
        _decoded(sent.Nodes.metadata, 2)  # unused, but the plain way checks it
        items = sent.Nodes.items or []
        for item in items:
            found = texts.node(item)
            if found is None:
                return None
            names.append(found[0])
            nodes.append(found[1])
    except (ValueError, RecursionError):  # msgspec's and orjson's errors
        return None
    if not isinstance(pod, dict):
        return None
    return Sent(pod, nodes, items, names)
