"""The cost estimate of the filtered comprehension forms (`l.map(x, p, f)`, `transformList`, `transformMap`,
`transformMapEntry` with a filter): a loop over their range like the unfiltered forms, with the filter's
cost added to each iteration, not a single call of an unknown function."""

from __future__ import annotations

import pytest

from rulesched.rules.cel.cost import estimate
from rulesched.rules.cel.shape import LIST_DEFAULT

LABELS = "node.metadata.labels"
CONTAINERS = "pod.spec.containers"


@pytest.mark.parametrize(
    ("unfiltered", "filtered"),
    [
        (f"{CONTAINERS}.map(c, c.name)", f"{CONTAINERS}.map(c, c.name != '', c.name)"),
        (f"{LABELS}.transformList(k, v, v)", f"{LABELS}.transformList(k, v, v != '', v)"),
        (f"{LABELS}.transformMap(k, v, v + 'x')", f"{LABELS}.transformMap(k, v, v != '', v + 'x')"),
        (f"{LABELS}.transformMapEntry(k, v, {{k: v}})", f"{LABELS}.transformMapEntry(k, v, v != '', {{k: v}})"),
    ],
)
def test_a_filter_adds_its_cost_to_every_iteration(unfiltered: str, filtered: str) -> None:
    plain, with_filter = estimate(unfiltered).cost, estimate(filtered).cost
    assert plain > LIST_DEFAULT  # a loop over the range's assumed size
    assert with_filter > plain
    assert (with_filter - plain) % LIST_DEFAULT == 0  # the filter's cost, once per element
