"""`rulesched tune --write DIR`: the rule files again, with new score weights and nothing else changed.

The YAML text is edited where each score's `weight:` value stands (found through the YAML parser's marks),
so that comments, order, quoting and every other line stay as they were; a score without a `weight` line
gets one, after its last field, at its fields' indentation. A file whose text has no score to change is
copied as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from rulesched.rules.loader import RULE_SUFFIXES


class WriteError(ValueError):
    """The rule files cannot be written; the message says where."""


def _edits(text: str, weights: Mapping[str, float]) -> list[tuple[int, int, str]]:
    """(start, end, replacement) of every weight to change in one file's text."""
    edits = []
    for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if not isinstance(document, yaml.MappingNode):
            continue
        name = _path(document, "metadata", "name")
        scores = _path(document, "spec", "scores")
        if not isinstance(name, yaml.ScalarNode) or not isinstance(scores, yaml.SequenceNode):
            continue
        for score in scores.value:
            rule = _path(score, "name")
            if not isinstance(rule, yaml.ScalarNode) or f"{name.value}/{rule.value}" not in weights:
                continue
            edits.append(_edit(text, score, weights[f"{name.value}/{rule.value}"]))
    return edits


def _path(node: yaml.Node, *keys: str) -> yaml.Node | None:
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        found = [v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key]
        if not found:
            return None
        node = found[0]
    return node


def _edit(text: str, score: yaml.Node, weight: float) -> tuple[int, int, str]:
    value = _number(weight)
    existing = _path(score, "weight")
    if existing is not None:
        return existing.start_mark.index, existing.end_mark.index, value
    if getattr(score, "flow_style", False) or not isinstance(score, yaml.MappingNode) or not score.value:
        raise WriteError(f"line {score.start_mark.line + 1}: a score written in flow style ({{...}}): add its weight")
    first_key = score.value[0][0]
    indent = " " * first_key.start_mark.column
    last = score.value[-1][1]
    if last.end_mark.column == 0:  # a block scalar ends where the next line starts
        return last.end_mark.index, last.end_mark.index, f"{indent}weight: {value}\n"
    end = text.find("\n", last.end_mark.index)  # after the last field's line, and its comment
    end = len(text) if end == -1 else end
    return end, end, f"\n{indent}weight: {value}"


def _number(weight: float) -> str:
    return str(int(weight)) if float(weight).is_integer() else repr(float(weight))


def rewritten(text: str, weights: Mapping[str, float]) -> str:
    """`text` with the weights of the named scores (`rule-set/rule`) changed."""
    for start, end, replacement in sorted(_edits(text, weights), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def write_rules(sources: Sequence[Path], weights: Mapping[str, float], target: Path) -> list[Path]:
    """Every rule file of `sources` (directories or files) into `target`, with the new weights."""
    files = []
    for source in sources:
        found = sorted(p for p in source.iterdir() if p.suffix in RULE_SUFFIXES) if source.is_dir() else [source]
        files += [p for p in found if p.is_file() and not p.name.startswith(".")]
    names = [p.name for p in files]
    if len(set(names)) != len(names):
        raise WriteError("two rule files of the same name in the --rules directories: write them one at a time")
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for path in files:
        out = target / path.name
        out.write_text(rewritten(path.read_text(), weights))
        written.append(out)
    return written
