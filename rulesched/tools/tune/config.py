"""What `rulesched tune` reads of a KubeSchedulerConfiguration (`--scheduler-config`): the score plugins'
weights of the profile that schedules with rulesched, and the extender's weight.

The profile is the one whose `schedulerName` is `rulesched`, else the first. Its plugins start from
kube-scheduler's defaults (`kube.DEFAULT_WEIGHTS`); `plugins.multiPoint` and `plugins.score` entries
with a `weight` change it, their `disabled` entries (or `*`) remove plugins. The extender's weight is the
first extender's (`extenders[0].weight`, 1 when not given, as in kube-scheduler).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rulesched.tools.tune.kube import DEFAULT_WEIGHTS


class ConfigError(ValueError):
    """A scheduler configuration that cannot be read; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Profile:
    """The score plugins' weights (by name; a missing plugin does not score) and the extender's weight."""

    plugins: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    extender: float = 1.0


def read_profile(path: Path | None) -> Profile:
    """The profile of `path`, or kube-scheduler's defaults with an extender of weight 1 (None)."""
    if path is None:
        return Profile()
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path}: cannot read it: {error}") from error
    if not isinstance(document, Mapping) or document.get("kind") != "KubeSchedulerConfiguration":
        raise ConfigError(f"{path}: not a KubeSchedulerConfiguration")
    profile = _profile(document)
    _check_strategy(profile, path)
    return Profile(_plugins(profile, path), _extender(document, path))


def _check_strategy(profile: Mapping[str, Any], path: Path) -> None:
    """Refuse a NodeResourcesFit scoring strategy the model does not have (it has LeastAllocated on cpu and
    memory, weight 1 each: kube-scheduler's default)."""
    for entry in profile.get("pluginConfig") or []:
        if not isinstance(entry, Mapping) or entry.get("name") != "NodeResourcesFit":
            continue
        strategy = (entry.get("args") or {}).get("scoringStrategy") or {}
        kind = strategy.get("type", "LeastAllocated")
        resources = [r.get("name") for r in strategy.get("resources") or [] if isinstance(r, Mapping)]
        if kind != "LeastAllocated" or resources not in ([], ["cpu", "memory"]):
            raise ConfigError(
                f"{path}: NodeResourcesFit scoringStrategy {kind} over {resources or ['cpu', 'memory']}: "
                "rulesched tune models LeastAllocated over cpu and memory only (docs/guides/tuning-weights.md)"
            )


def _profile(document: Mapping[str, Any]) -> Mapping[str, Any]:
    profiles = [p for p in document.get("profiles") or [] if isinstance(p, Mapping)]
    named = [p for p in profiles if p.get("schedulerName") == "rulesched"]
    return (named or profiles or [{}])[0]


def _plugins(profile: Mapping[str, Any], path: Path) -> dict[str, int]:
    weights = dict(DEFAULT_WEIGHTS)
    plugins = profile.get("plugins") or {}
    for point in ("multiPoint", "score"):
        entries = plugins.get(point) or {}
        for disabled in entries.get("disabled") or []:
            name = disabled.get("name") if isinstance(disabled, Mapping) else None
            if name == "*":
                weights = {}
            elif name:
                weights.pop(name, None)
        for enabled in entries.get("enabled") or []:
            if not isinstance(enabled, Mapping) or not enabled.get("name"):
                raise ConfigError(f"{path}: plugins.{point}.enabled: an entry without a name")
            weight = enabled.get("weight", weights.get(enabled["name"], 1))
            if not isinstance(weight, int) or weight < 0:
                raise ConfigError(f"{path}: plugins.{point}.enabled {enabled['name']}: weight {weight!r} is not >= 0")
            weights[enabled["name"]] = weight
    return weights


def _extender(document: Mapping[str, Any], path: Path) -> float:
    extenders = [e for e in document.get("extenders") or [] if isinstance(e, Mapping)]
    if not extenders:
        return 1.0
    weight = extenders[0].get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight <= 0:
        raise ConfigError(f"{path}: extenders[0].weight {weight!r}: want a positive integer")
    return float(weight)
