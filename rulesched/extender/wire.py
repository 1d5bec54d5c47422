"""The extender wire types of kube-scheduler (`k8s.io/kube-scheduler/extender/v1`), exactly.

The Go structs have no json tags, so the scheduler sends Go field names and every unused field as
`null`; Go decodes answers case-insensitively. Requests are therefore read case-insensitively (old
extenders send `pod`, `nodes`, `nodenames`) and answers use the exact Go names. Only the parts the
extender needs are checked: the objects themselves are passed on untouched, so full mode echoes the
passing nodes byte-for-byte equivalent.

A full-mode body in the exact form kube-scheduler writes is read without decoding the nodes sent before
(`wire_full.read_sent`); every other body, and any that way finds amiss, is read the plain way here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

import msgspec
import orjson

from rulesched.extender.wire_full import NodeTexts, read_sent

JSON = dict[str, Any]


class WireError(ValueError):
    """A request body that is not what kube-scheduler sends; answered with 400 and this reason."""


class TooManyError(WireError):
    """More candidates in one request than `--max-candidates`; answered with 413 and this reason."""


def folded(document: Mapping[str, Any], field: str) -> JSON:
    """`document` with its keys folded to lower case (Go decodes case-insensitively); keys that differ
    only in case (`NodeNames` and `nodenames`) would overwrite each other silently, so they are an error."""
    lowered = {str(k).lower(): v for k, v in document.items()}
    if len(lowered) != len(document):
        seen: dict[str, str] = {}
        for key in document:
            if key.lower() in seen:
                raise WireError(f"{field} has keys that differ only in case: {seen[key.lower()]!r} and {key!r}")
            seen[key.lower()] = key
    return lowered


_SENT_KEYS = {"Pod": "pod", "Nodes": "nodes", "NodeNames": "nodenames"}
"""ExtenderArgs' keys as kube-scheduler writes them (the Go field names), and as read (lower case)."""


def decode(body: bytes) -> JSON:
    """The JSON object in `body`, with its top-level keys folded to lower case."""
    if not body:
        raise WireError("empty request body: want a JSON object")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise WireError(f"request body is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise WireError(f"request body must be a JSON object, not {_kind(document)}")
    if document.keys() == _SENT_KEYS.keys():  # kube-scheduler's own: folded without a look at each key
        return {"pod": document["Pod"], "nodes": document["Nodes"], "nodenames": document["NodeNames"]}
    return folded(document, "the request")


def _kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _object(value: object, field: str, *, optional: bool = False) -> JSON | None:
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise WireError(f"{field} must be an object, not {_kind(value)}")
    return value


def _name(obj: JSON, field: str) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        raise WireError(f"{field}.metadata.name must be a non-empty string")
    return name


def _pod(document: JSON) -> JSON:
    pod = _object(document.get("pod"), "Pod")
    assert pod is not None
    return pod


def _all_strings(values: list[Any]) -> bool:
    """Whether every item is a string; `str.join` checks that in C, ten times as fast as a loop here."""
    try:
        "".join(values)
    except TypeError:
        return False
    return True


@dataclass(slots=True)
class ExtenderArgs:
    """A filter or prioritize request: full mode carries `nodes`, names mode `node_names`. (Not frozen: one is
    made for every call, three times as fast; nothing changes one.)"""

    pod: JSON
    nodes: list[JSON] | None
    node_names: list[str] | None
    texts: Sequence[msgspec.Raw] | None = None
    """Full mode read from kube-scheduler's own form: each node's JSON text as sent, in order."""
    sent_names: list[str] | None = None
    """Full mode read from kube-scheduler's own form: each node's name, in order."""

    @property
    def names(self) -> list[str]:
        if self.node_names is not None:
            return self.node_names
        if self.sent_names is not None:
            return self.sent_names
        return [_name(n, "Nodes.items[]") for n in self.nodes or []]

    def passing(self, kept: Container[str]) -> list[Any]:
        """Full mode: the nodes named in `kept`, in order, as the filter answer echoes them (the text each
        was sent as, when there is one)."""
        if self.texts is not None and self.sent_names is not None:
            pairs = zip(self.sent_names, self.texts, strict=True)
            return [orjson.Fragment(bytes(text)) for name, text in pairs if name in kept]
        return [n for n in self.nodes or [] if n["metadata"]["name"] in kept]

    @classmethod
    def parse(cls, body: bytes, max_candidates: int, texts: NodeTexts | None = None) -> ExtenderArgs:
        """The request in `body`; at most `max_candidates` candidates, each named once. `texts`: the nodes
        decoded for earlier requests, for full mode (see `wire_full`)."""
        sent = read_sent(body, texts) if texts is not None else None
        if sent is not None:
            args = cls(pod=sent.pod, nodes=sent.nodes, node_names=None, texts=sent.texts, sent_names=sent.names)
        else:
            args = cls._parse(body)
        names = args.names
        if len(names) > max_candidates:
            raise TooManyError(f"{len(names)} candidate nodes, more than {max_candidates} (--max-candidates)")
        if len(set(names)) != len(names):
            repeated = next(name for name, count in Counter(names).items() if count > 1)
            raise WireError(f"node {repeated!r} is a candidate more than once (kube-scheduler never repeats one)")
        return args

    @classmethod
    def _parse(cls, body: bytes) -> ExtenderArgs:
        document = decode(body)
        pod = _pod(document)
        node_list = _object(document.get("nodes"), "Nodes", optional=True)
        names = document.get("nodenames")
        nodes: list[JSON] | None = None
        if node_list is not None:
            items = folded(node_list, "Nodes").get("items")
            if items is None:
                items = []
            if not isinstance(items, list):
                raise WireError(f"Nodes.items must be an array, not {_kind(items)}")
            for index, item in enumerate(items):
                _name(_object(item, f"Nodes.items[{index}]") or {}, f"Nodes.items[{index}]")
            nodes = items
        if names is not None and (not isinstance(names, list) or not _all_strings(names)):
            raise WireError("NodeNames must be an array of strings")
        if nodes is None and names is None:
            raise WireError("ExtenderArgs needs Nodes (nodeCacheCapable: false) or NodeNames (nodeCacheCapable: true)")
        return cls(pod=pod, nodes=nodes, node_names=None if nodes is not None else names)


@dataclass(frozen=True, slots=True)
class Victims:
    """One node's victims as UIDs, and the PDB violations evicting them would cause."""

    uids: list[str]
    pdb_violations: int


@dataclass(frozen=True, slots=True)
class ExtenderPreemptionArgs:
    pod: JSON
    victims: dict[str, Victims]

    @classmethod
    def parse(cls, body: bytes, max_candidates: int) -> ExtenderPreemptionArgs:
        """The request in `body`; victims on at most `max_candidates` nodes."""
        document = decode(body)
        pod = _pod(document)
        meta = _object(document.get("nodenametometavictims"), "NodeNameToMetaVictims", optional=True)
        full = _object(document.get("nodenametovictims"), "NodeNameToVictims", optional=True)
        by_node = meta or full or {}
        if len(by_node) > max_candidates:
            raise TooManyError(f"victims on {len(by_node)} nodes, more than {max_candidates} (--max-candidates)")
        victims: dict[str, Victims] = {}
        for node, entry in by_node.items():
            victims[node] = _victims(entry, node, meta is not None)
        return cls(pod=pod, victims=victims)


def _victims(entry: object, node: str, meta: bool) -> Victims:
    field = f"{'NodeNameToMetaVictims' if meta else 'NodeNameToVictims'}[{node}]"
    lowered = folded(_object(entry, field) or {}, field)
    pods = lowered.get("pods") or []
    if not isinstance(pods, list):
        raise WireError(f"{field}.Pods must be an array")
    uids = []
    for index, pod in enumerate(pods):
        where = f"{field}.Pods[{index}]"
        item = _object(pod, where) or {}
        if meta:
            uid = folded(item, where).get("uid")
        else:
            metadata = _object(item.get("metadata"), f"{where}.metadata", optional=True) or {}
            uid = metadata.get("uid")
        if not isinstance(uid, str):
            raise WireError(f"{where} has no UID")
        uids.append(uid)
    violations = lowered.get("numpdbviolations") or 0
    if not isinstance(violations, int) or isinstance(violations, bool):
        raise WireError(f"{field}.NumPDBViolations must be an integer")
    return Victims(uids, violations)


@dataclass(frozen=True, slots=True)
class ExtenderBindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str

    @classmethod
    def parse(cls, body: bytes) -> ExtenderBindingArgs:
        document = decode(body)
        values = []
        for key, field in (
            ("podname", "PodName"),
            ("podnamespace", "PodNamespace"),
            ("poduid", "PodUID"),
            ("node", "Node"),
        ):
            value = document.get(key)
            if not isinstance(value, str) or not value:
                raise WireError(f"{field} must be a non-empty string")
            values.append(value)
        return cls(*values)


def filter_result(
    nodes: list[JSON] | None,
    node_names: list[str] | None,
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> JSON:
    """ExtenderFilterResult: full mode sets `Nodes`, names mode `NodeNames`, the other stays null."""
    return {
        "Nodes": {"metadata": {}, "items": nodes} if nodes is not None else None,
        "NodeNames": node_names,
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": dict(unresolvable),
        "Error": error,
    }


def host_priority_list(scores: Mapping[str, int]) -> list[JSON]:
    """HostPriorityList: a bare array of `{"Host", "Score"}` with integer scores."""
    return [{"Host": host, "Score": int(score)} for host, score in scores.items()]


class Scored(Protocol):
    """A candidate's verdict as a prioritize answer reads it: its score, and its part of the answer once encoded."""

    score: int | None
    encoded: bytes | None


_ENCODED = attrgetter("encoded")


def host_priorities(names: Sequence[str], verdicts: Sequence[Scored]) -> bytes:
    """The HostPriorityList of `names` and their `verdicts` (a score of None is 0), as `host_priority_list`
    encodes it. Each verdict's part, `{"Host":"<name>","Score":<score>}`, is encoded once and kept on the
    verdict (its `encoded`): a verdict kept by the rules is one node context's, always answered under its
    name, and a prioritize call over 1000 nodes is then two C-level passes and a join, not 1000 dictionaries
    to make and encode (five times as long, measured)."""
    parts: list[bytes | None] = list(map(_ENCODED, verdicts))
    if not all(parts):  # a part is never empty: only a missing one is false
        parts = [part or _encoded(verdict, name) for part, verdict, name in zip(parts, verdicts, names, strict=True)]
    return b"[" + b",".join(parts) + b"]"  # type: ignore[arg-type]  # every part filled


def _encoded(verdict: Scored, name: str) -> bytes:
    # Formatted anew, not orjson's own bytes: those are cut down from a larger buffer, and kept by thousands
    # of verdicts they held on to the memory around them (16 MB more at 5000 nodes, measured).
    part = verdict.encoded = b'{"Host":%b,"Score":%d}' % (orjson.dumps(name), int(verdict.score or 0))
    return part


def preemption_result(victims: Mapping[str, Victims]) -> JSON:
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in v.uids], "NumPDBViolations": v.pdb_violations}
            for node, v in victims.items()
        }
    }


def binding_result(error: str) -> JSON:
    return {"Error": error}
