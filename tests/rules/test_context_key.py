"""A node context's key tells two bodies of one node apart by what the rules read: its resourceVersion when it
has one, else a digest of the node's content (never the object's `id`, which a new object reuses once the old
one is freed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rulesched.decide.verbs import Verb
from rulesched.rules.cel import make_engine
from rulesched.rules.context import Change, node_context
from rulesched.rules.loader import load_rule_book
from tests.builders import decide, make_node, make_pod
from tests.rulebooks import LIVE, rules_dir

CALLS = 200


def body(labelled: bool) -> dict[str, Any]:
    """Node `same` without a resourceVersion, with the founding example's label or without it."""
    node = make_node("same", labels={"filter.xy.com": "yes"} if labelled else {"other": "yes"})
    del node["metadata"]["resourceVersion"]
    return node


def test_a_node_without_a_resource_version_is_keyed_by_its_content_also_once_the_last_body_is_freed() -> None:
    versions: dict[bool, set[object]] = {True: set(), False: set()}
    for index in range(CALLS):  # each body freed before the next is made: a new dict often takes its address
        labelled = index % 2 == 0
        versions[labelled].add(node_context(body(labelled), None).key.version)
    assert len(versions[True]) == 1, "the same body is the same key"
    assert len(versions[False]) == 1
    assert versions[True] != versions[False], "another body is another key"


def test_two_bodies_of_a_node_are_another_node_to_the_caches() -> None:
    first, second = node_context(body(True), None), node_context(body(False), None)
    assert first.key.change(second.key) is Change.OTHER
    assert first.key.change(node_context(body(True), None).key) is Change.PODS  # nothing changed


def test_a_resource_version_is_the_key_as_it_is() -> None:
    assert node_context(make_node("same", resource_version="42"), None).key.version == "42"


def test_two_bodies_under_one_name_never_share_a_cached_decision_even_once_the_first_is_freed(tmp_path: Path) -> None:
    book = load_rule_book([rules_dir(tmp_path / "rules", LIVE)], make_engine("cpp"))
    pod = make_pod("web")
    answers = []
    for index in range(CALLS):  # the same book's plan, its caches kept from call to call
        labelled = index % 2 == 0
        decision = decide(book, pod, [node_context(body(labelled), None)], Verb.FILTER)
        answers.append((labelled, decision.passed))
        del decision
    assert answers == [(index % 2 == 0, ["same"] if index % 2 == 0 else []) for index in range(CALLS)]
