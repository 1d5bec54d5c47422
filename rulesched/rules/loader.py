"""Reads a rules directory (or files) into a RuleBook, all or nothing.

A ConfigMap volume holds the visible files as symlinks through `..data`, which the kubelet swaps
atomically to a new hidden directory. The loader resolves `..data` once and reads every file from
that one snapshot, so a swap in the middle of a read cannot mix two versions. Hidden entries are
skipped. Every problem in every file is reported at once, with file, line, rule set, rule and field.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rulesched.rules.book import RuleBook, compile_rule_set
from rulesched.rules.cel import Engine
from rulesched.rules.compiled import CompiledRuleSet
from rulesched.rules.errors import LoadError, RulesLoadFailed
from rulesched.rules.metricsource import KIND as METRIC_SOURCE
from rulesched.rules.metricsource import MetricSource, duplicate_names, undefined_metrics
from rulesched.rules.model import (
    MAX_EXPRESSION_LENGTH,
    Filter,
    MatchCondition,
    Metadata,
    RuleSet,
    RuleSetSpec,
    Score,
    Variable,
)
from rulesched.rules.yaml_checks import check_unique_keys, yaml_error

RULE_SUFFIXES = (".yaml", ".yml")
_READ_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document of a rule file, with its node tree for line numbers."""

    file: str
    data: Any
    node: yaml.Node | None

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        node, line = self.node, None
        for key in loc:
            if node is None:
                break
            line = node.start_mark.line + 1
            node = _child(node, key)
        return node.start_mark.line + 1 if node is not None else line


def _child(node: yaml.Node, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if getattr(k, "value", None) == key), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        child: yaml.Node = node.value[key]
        return child
    return None


def snapshots(paths: Iterable[Path]) -> tuple[str, ...]:
    """Where each ConfigMap-style directory's `..data` points now ("" for plain paths)."""
    return tuple(os.path.realpath(p / "..data") if (p / "..data").exists() else "" for p in paths)


def rule_files(paths: Iterable[Path]) -> list[tuple[str, Path]]:
    """(name to report, path to read) for every rule file under `paths`, in a stable order.

    In a ConfigMap-style directory the files are listed and read inside the snapshot `..data`
    points to, so that every file comes from one version; they are reported by their visible names.
    """
    found: list[tuple[str, Path]] = []
    for path in paths:
        if not path.is_dir():
            if path.exists():
                found.append((str(path), path))
            continue
        data = path / "..data"
        snapshot = Path(os.path.realpath(data)) if data.exists() else path
        for entry in sorted(snapshot.iterdir()):
            if entry.name.startswith(".") or entry.suffix not in RULE_SUFFIXES:
                continue
            if entry.is_file():
                found.append((str(path / entry.name), entry))
    return found


def read_documents(files: Sequence[tuple[str, Path]]) -> tuple[list[Document], list[LoadError], str]:
    """Every YAML document in `files`, the errors met reading them, and a hash of their content."""
    documents: list[Document] = []
    errors: list[LoadError] = []
    digest = hashlib.sha256()
    for name, path in files:
        try:
            content = path.read_bytes()
        except OSError as error:
            errors.append(LoadError(file=name, message=f"cannot read: {error.strerror or error}"))
            continue
        digest.update(f"{Path(name).name}\0{len(content)}\0".encode())
        digest.update(content)
        try:
            documents.extend(_parse(name, content.decode("utf-8")))
        except UnicodeDecodeError:
            errors.append(LoadError(file=name, message="not UTF-8 text"))
        except yaml.YAMLError as error:
            errors.append(yaml_error(name, error))
    return documents, errors, digest.hexdigest()


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader when PyYAML was built with it: 50 times as fast on a large file (0.01 s for 400 KB)."""


def _parse(name: str, text: str) -> list[Document]:
    """The documents of a file: read by libyaml; a file it refuses is read again by PyYAML's own loader, whose
    messages (and the hint for an unquoted `: `) are the ones documented."""
    try:
        return _documents(name, text, _FAST_LOADER)
    except yaml.YAMLError:
        if _FAST_LOADER is yaml.SafeLoader:
            raise
    return _documents(name, text, yaml.SafeLoader)


def _documents(name: str, text: str, loader_class: Any) -> list[Document]:
    loader = loader_class(text)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            check_unique_keys(node)
            data = loader.construct_document(node)
            if data is not None:
                documents.append(Document(file=name, data=data, node=node))
        return documents
    finally:
        loader.dispose()


def _validate(document: Document) -> tuple[RuleSet | None, list[LoadError]]:
    data = document.data
    if not isinstance(data, dict):
        message = "a rule file document must be a mapping"
        return None, [LoadError(file=document.file, line=document.line_of(()), message=message)]
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    rule_set_name = name if isinstance(name, str) else None
    try:
        return RuleSet.model_validate(data), []
    except ValidationError as error:
        return None, [_validation_error(document, rule_set_name, item) for item in error.errors()]


_RULE_MODELS: dict[str, type[MatchCondition | Variable | Filter | Score]] = {
    "matchConditions": MatchCondition,
    "variables": Variable,
    "filters": Filter,
    "scores": Score,
}


def _text(value: object, default: str) -> str:
    return value if isinstance(value, str) and value else default


def _expression(value: object, default: str) -> str:
    """An invalid rule's expression, compiled for its CEL errors; one longer than an expression may be (which
    validation reported) is not: parsing 400 KB would take a minute, to report what is already known."""
    text = _text(value, default)
    return text if len(text) <= MAX_EXPRESSION_LENGTH else default


def _partial(data: Any) -> RuleSet | None:
    """What can be compiled of a document that failed validation, so its CEL errors are reported too.

    Invalid rules keep their place (field paths stay right), their name and their expressions;
    whatever else is wrong with them was reported by validation already.
    """
    spec = data.get("spec") if isinstance(data, dict) else None
    if not isinstance(spec, dict):
        return None
    lists: dict[str, Any] = {}
    for key, model in _RULE_MODELS.items():
        items = spec.get(key) if isinstance(spec.get(key), list) else []
        lists[key] = []
        for index, item in enumerate(items or []):
            try:
                lists[key].append(model.model_validate(item))
            except ValidationError:
                raw = item if isinstance(item, dict) else {}
                fields: dict[str, Any] = {
                    "name": _text(raw.get("name"), f"invalid-{index}"),
                    "expression": _expression(raw.get("expression"), "true"),
                }
                if key == "filters":
                    fields["messageExpression"] = _expression(raw.get("messageExpression"), "")
                lists[key].append(model.model_construct(**fields))
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    name = _text(metadata.get("name"), "unnamed")
    return RuleSet.model_construct(
        apiVersion="rulesched.io/v1alpha1",
        kind="RuleSet",
        metadata=Metadata.model_construct(name=name),
        spec=RuleSetSpec.model_construct(**lists),
    )


def _validation_error(document: Document, rule_set: str | None, item: Any) -> LoadError:
    loc: tuple[str | int, ...] = tuple(item["loc"])
    rule = None
    if len(loc) >= 3 and loc[0] == "spec" and isinstance(loc[2], int):
        rules = document.data.get("spec", {}).get(loc[1], [])
        if isinstance(rules, list) and loc[2] < len(rules) and isinstance(rules[loc[2]], dict):
            rule = rules[loc[2]].get("name")
    field_path = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")
    return LoadError(
        file=document.file,
        line=document.line_of(loc),
        rule_set=rule_set,
        rule=rule if isinstance(rule, str) else None,
        field=field_path or None,
        message=item["msg"] + _too_long(item),
    )


def _too_long(item: Any) -> str:
    """For a string over its length limit, how long it is and how it begins (never all of it: it may be huge)."""
    text = item.get("input")
    if item.get("type") != "string_too_long" or not isinstance(text, str):
        return ""
    return f": it has {len(text)} characters; it begins {text[:60]!r}"


def _is_metric_source(document: Document) -> bool:
    return isinstance(document.data, dict) and document.data.get("kind") == METRIC_SOURCE


def _query_names(data: Any) -> set[str]:
    """The query names a MetricSource document declares, read even from one that does not validate (so that
    the rules reading them are not reported as well)."""
    spec = data.get("spec") if isinstance(data, dict) else None
    queries = spec.get("queries") if isinstance(spec, dict) else None
    items = queries if isinstance(queries, list) else []
    return {q["name"] for q in items if isinstance(q, dict) and isinstance(q.get("name"), str)}


def metric_sources(documents: Sequence[Document]) -> tuple[list[MetricSource], frozenset[str], list[LoadError]]:
    """The MetricSource documents validated, every query name they declare, and their errors."""
    sources: list[tuple[str, MetricSource, Any]] = []
    names: set[str] = set()
    errors: list[LoadError] = []
    for document in filter(_is_metric_source, documents):
        names |= _query_names(document.data)
        name = (
            document.data.get("metadata", {}).get("name") if isinstance(document.data.get("metadata"), dict) else None
        )
        try:
            sources.append((document.file, MetricSource.model_validate(document.data), document.line_of))
        except ValidationError as error:
            rule_set = name if isinstance(name, str) else None
            errors.extend(_validation_error(document, rule_set, item) for item in error.errors())
    errors.extend(duplicate_names(sources))
    return [source for _, source, _ in sources], frozenset(names), errors


def _name_of(document: Document) -> object:
    metadata = document.data.get("metadata") if isinstance(document.data, dict) else None
    return metadata.get("name") if isinstance(metadata, dict) else None


def owners_first(documents: Sequence[Document], owners: Mapping[str, str]) -> list[Document]:
    """`documents` with those in the file that held their rule set name in the active rules first (in order
    otherwise): when a change brings a second rule set of a name, the file that brought it is blamed, not the
    file that had it all along."""
    return sorted(documents, key=lambda d: owners.get(str(_name_of(d))) != d.file)


def compile_documents(
    documents: Sequence[Document],
    engine: Engine,
    custom: frozenset[str] = frozenset(),
    owners: Mapping[str, str] | None = None,
) -> tuple[list[CompiledRuleSet], list[LoadError]]:
    """Validate and compile every rule set document (MetricSources are read by `metric_sources`); rule set
    names must be unique across all files (a repeated name is blamed on the file that did not hold it in the
    active rules, `owners`: rule set name → file), and the custom metrics the rules read must be in `custom`."""
    compiled: list[CompiledRuleSet] = []
    errors: list[LoadError] = []
    seen: dict[str, str] = {}
    for document in owners_first(documents, owners or {}):
        if _is_metric_source(document):
            continue
        rule_set, problems = _validate(document)
        errors.extend(problems)
        if rule_set is None:
            partial = _partial(document.data) if problems else None
            if partial is not None:
                _, more = compile_rule_set(partial, document.file, engine, document.line_of)
                errors.extend(more)
            continue
        name = rule_set.metadata.name
        if name in seen:
            errors.append(
                LoadError(
                    file=document.file,
                    line=document.line_of(("metadata", "name")),
                    rule_set=name,
                    field="metadata.name",
                    message=f"duplicate rule set name, already defined in {seen[name]}",
                )
            )
            continue
        seen[name] = document.file
        result, problems = compile_rule_set(rule_set, document.file, engine, document.line_of)
        errors.extend(problems)
        errors.extend(undefined_metrics(rule_set, document.file, document.line_of, custom))
        if result is not None:
            compiled.append(result)
    return compiled, errors


def _read_consistently(
    paths: Sequence[Path],
) -> tuple[list[tuple[str, Path]], list[Document], list[LoadError], str]:
    """Read every rule file; if a `..data` swap happened meanwhile, read again from the new version."""
    for _ in range(_READ_ATTEMPTS):
        before = snapshots(paths)
        try:
            files = rule_files(paths)
        except OSError:  # the snapshot was removed while being listed: a swap is under way
            continue
        documents, errors, digest = read_documents(files)
        if snapshots(paths) == before:
            return files, documents, errors, digest
    files = rule_files(paths)
    return files, *read_documents(files)


def load_rule_book(
    paths: Sequence[Path], engine: Engine, *, generation: int = 1, active: RuleBook | None = None
) -> RuleBook:
    """The compiled rules under `paths`; raises `RulesLoadFailed` with every error found. `active`: the rules
    they would replace (a repeated rule set name is blamed on the file that brought it)."""
    files, documents, errors, digest = _read_consistently(paths)
    missing = [LoadError(file=str(p), message="no such file or directory") for p in paths if not p.exists()]
    sources, custom, invalid = metric_sources(documents)
    owners = {rs.name: rs.file for rs in active.rule_sets} if active is not None else None
    compiled, problems = compile_documents(documents, engine, custom, owners)
    warnings = tuple(problem for problem in problems if problem.warning)
    problems = [problem for problem in problems if not problem.warning]
    errors = missing + errors + sorted(invalid + problems, key=lambda e: (e.file, e.line or 0))
    if errors:
        raise RulesLoadFailed(errors)
    rule_sets = tuple(sorted(compiled, key=lambda r: r.name))
    return RuleBook(
        rule_sets=rule_sets,
        engine=engine,
        hash=digest,
        generation=generation,
        files=tuple(name for name, _ in files),
        metric_sources=tuple(sorted(sources, key=lambda s: s.metadata.name)),
        warnings=warnings,
    )
