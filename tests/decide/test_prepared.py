"""A rule book's plan is made once, kept beside the book while it lives, and never changed: its results are
kept by its caches, which a deadline drops."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from rulesched.decide.fast import prepared
from rulesched.decide.fast.prepared import _PLANS
from rulesched.rules.cel import make_engine
from tests.builders import load_spec

SPEC = """
filters:
- name: labelled
  expression: has(node.metadata.labels)
"""


def test_a_book_has_one_plan_while_it_lives_and_takes_it_along_when_it_goes(tmp_path: Path) -> None:
    book = load_spec(tmp_path / "a", make_engine("cpp"), SPEC)
    plan = prepared(book)
    assert prepared(book) is plan
    other = load_spec(tmp_path / "b", make_engine("cpp"), SPEC)
    assert prepared(other) is not plan
    key, gone = id(book), weakref.ref(plan)
    del book, plan
    gc.collect()
    assert gone() is None, "the plan outlived its book"
    assert key not in _PLANS or _PLANS[key][0]() is not None


def test_a_plan_does_not_change_and_its_caches_reset(tmp_path: Path) -> None:
    plan = prepared(load_spec(tmp_path, make_engine("cpp"), SPEC))
    with pytest.raises(AttributeError, match="a plan does not change"):
        plan.generation = 2
    token = plan.caches.token
    plan.caches.reset()
    assert plan.caches.token != token
