"""What PyYAML leaves to its callers when reading rule files: keys given twice, and where an error is."""

from __future__ import annotations

import yaml

from rulesched.rules.errors import LoadError

_QUOTE_HINT = (
    "; a plain (unquoted) value cannot contain ': ' (YAML reads a mapping there): "
    'quote the expression (expression: "…") or write it as a block (expression: >-)'
)


def yaml_error(name: str, error: yaml.YAMLError) -> LoadError:
    """Where PyYAML found the problem, line and column; a problem found only at the end of the stream (a quote
    never closed) is placed where what was left open began."""
    problem = getattr(error, "problem", None) or str(error)
    mark, context = getattr(error, "problem_mark", None), getattr(error, "context_mark", None)
    if context is not None and (mark is None or "end of stream" in problem or "<stream end>" in problem):
        mark, problem = context, f"{getattr(error, 'context', None) or 'this'}, {problem}"
    if mark is None:
        return LoadError(file=name, message=f"invalid YAML: {problem}")
    hint = _QUOTE_HINT if problem == "mapping values are not allowed here" else ""
    message = f"invalid YAML at column {mark.column + 1}: {problem}{hint}"
    return LoadError(file=name, line=mark.line + 1, message=message)


def check_unique_keys(node: yaml.Node | None) -> None:
    """PyYAML keeps the last of two equal keys; a repeated `expression:` must not silently win."""
    pending: list[yaml.Node | None] = [node]
    visited: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in visited:
            continue  # an alias to a node already checked (or a recursive one)
        visited.add(id(current))
        if isinstance(current, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if (key.tag, key.value) in seen:
                        raise yaml.constructor.ConstructorError(
                            problem=f"duplicate key {key.value!r}", problem_mark=key.start_mark
                        )
                    seen.add((key.tag, key.value))
                pending.append(value)
        elif isinstance(current, yaml.SequenceNode):
            pending.extend(current.value)
