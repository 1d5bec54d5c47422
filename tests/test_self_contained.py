"""The suite needs nothing beside the repository: the recordings it replays live in tests/fixtures/."""

from __future__ import annotations

import pytest

from tests import outside_reads
from tests.paths import FIXTURES, REPO


def test_a_read_beside_the_repository_is_caught() -> None:
    beside = REPO.parent / "shared" / "fixtures" / "no-such-recording.json"
    with pytest.raises(FileNotFoundError):
        beside.read_text()
    assert outside_reads.take() == [str(beside)]


def test_reads_inside_the_repository_are_allowed() -> None:
    (FIXTURES / "README.md").read_text()
    assert outside_reads.take() == []


def test_every_fixture_folder_says_where_it_came_from() -> None:
    readme = (FIXTURES / "README.md").read_text()
    folders = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    assert folders
    assert [f for f in folders if f"`{f}/`" not in readme] == []
