"""The context names are declared once (`rules/vocabulary.py`): a name added there, and nowhere else, is read
by rules end to end (loaded, decided, the fast path held to the reference), and the docs list every name."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from rulesched.rules.cel.analysis import reads
from rulesched.rules.vocabulary import CONTEXT_NAMES, doc_table
from tests.decide.test_fast_path import CONDITIONS, MESSAGES, NODE_FILTERS, POD_FILTERS, SCORES
from tests.paths import REPO

ZONE = """\
    Name(
        "zone", "dyn", Side.NODE, string(63), "string", "the node's `zone` label (made up by a test)",
        read_node=lambda context: (context.node.get("metadata", {}).get("labels") or {}).get("zone", ""),
    ),
"""
"""A made-up name: one entry in the table."""

CHECK = """
import random
import sys
from pathlib import Path

import rulesched
from rulesched.decide import reference
from rulesched.rules import vocabulary
from rulesched.rules.cel import ENGINE_NAMES, make_engine
from rulesched.rules.cel.cost import estimate
from rulesched.decide.fast import evaluate, prepared
from rulesched.decide.verbs import Call
from tests.decide import test_fast_path as differential
from tests.builders import NOW, load_spec, make_context, make_node, make_pod

copy, work = Path(sys.argv[1]), Path(sys.argv[2])
assert Path(rulesched.__file__).is_relative_to(copy), rulesched.__file__
assert "zone" in vocabulary.CONTEXT_NAMES and "`zone`" in vocabulary.doc_table()
assert estimate("zone.size() > 2", {}, 10_000).cost < 100
spec = '''
filters:
- name: zone-a
  expression: zone == 'a' || pod.metadata.labels['zone'] == zone
scores:
- name: zone-b
  expression: "zone == 'b' ? 10 : 0"
  normalize: Clamp
'''
nodes = [make_context(make_node(f"n-{z}", labels={"zone": z})) for z in "abc"]
for name in ENGINE_NAMES:
    book = load_spec(work / name, make_engine(name), spec)
    for pod in (make_pod("web", labels={"zone": "c"}), make_pod("db")):
        for _ in range(2):  # computed, then from the caches
            decided = evaluate(prepared(book), Call(pod, nodes, now=NOW))
            assert decided == reference.evaluate(book, Call(pod, nodes, now=NOW))
    assert decided.passed == ["n-a"], decided.passed
differential.NODE_FILTERS.append("zone != 'c'")
differential.POD_FILTERS.append(
    "!has(pod.metadata.labels) || !('zone' in pod.metadata.labels) || zone == pod.metadata.labels['zone']"
)
differential.SCORES.append(("zone == 'a' ? 10.0 : double(size(zone))", "MinMax"))
for name in ENGINE_NAMES:
    for seed in range(3):
        assert differential.run_calls(work / f"{name}-{seed}", make_engine(name), seed, 20) == 20
print("zone works")
"""


def test_a_name_added_to_the_vocabulary_alone_is_read_by_rules_end_to_end(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(REPO / "rulesched", copy / "rulesched", ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / "rulesched" / "rules" / "vocabulary.py"
    opening = "NAMES: tuple[Name, ...] = (\n"
    text = table.read_text()
    assert text.count(opening) == 1
    table.write_text(text.replace(opening, opening + ZONE))
    script = tmp_path / "check.py"
    script.write_text(textwrap.dedent(CHECK))
    # The copy first on the path (the script's own directory is not: it is run from the copy, with `-c`).
    found = subprocess.run(
        [sys.executable, "-c", script.read_text(), str(copy), str(tmp_path / "work")],
        cwd=copy,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert found.returncode == 0, found.stderr[-3000:]
    assert found.stdout.strip() == "zone works"


def test_the_docs_list_every_name_as_the_vocabulary_declares_it() -> None:
    assert doc_table() in (REPO / "docs" / "rules" / "language.md").read_text()


def test_the_differential_test_reads_every_name() -> None:
    expressions = [*CONDITIONS, *NODE_FILTERS, *POD_FILTERS, *MESSAGES, *(e for e, _ in SCORES)]
    read = set().union(*(reads(expression).names for expression in expressions if expression))
    assert read == set(CONTEXT_NAMES)
