"""The RuleTest file format (`rulesched.io/v1alpha1`, kind `RuleTest`): rules, a cluster snapshot, cases.

```yaml
apiVersion: rulesched.io/v1alpha1
kind: RuleTest
metadata: {name: xy-least-cpu}
spec:
  rules: ../xy-least-cpu.yaml        # rule files or directories, relative to this file (string or list)
  nodes: fixtures/nodes.yaml         # a NodeList (JSON or YAML)
  metrics: fixtures/metrics.yaml     # optional NodeMetricsList
  pods: fixtures/pods.yaml           # optional PodList: the pods on the nodes (`pods`, `allocated`)
  namespaces: fixtures/ns.yaml       # optional NamespaceList (`namespaceObject`)
  celEngine: cpp                     # optional; default: the --cel-engine flag
  cases:
  - name: labelled nodes only, least CPU first
    pod: fixtures/pod.yaml           # a Pod file, or an inline Pod mapping
    nodes: fixtures/other.yaml       # optional: this case's own NodeList (and `metrics`, `pods`, `namespaces`)
    now: "2026-11-22T10:00:00Z"      # optional: the request time rules see as `now`
    estimate: {cpu: 1.5, memory: 200000000, samples: 6}  # optional: the pod's `estimate` (default: its requests)
    expect:
      appliedRuleSets: [xy-least-cpu]          # exactly these rule sets apply
      feasible: [k8s-node1, k8s-node2]         # exactly these nodes pass (order-insensitive)
      rejected: {k8s-master: "filter.xy.com"}  # these nodes are rejected; reason contains the text
      best: k8s-node2                          # the first of the ranking
      order: [k8s-node2, k8s-node1]            # the whole ranking (final score, ties by name)
      scores: {k8s-node2: 10}                  # exact final scores, 0..10
```

Every expectation is optional; a case checks only what it states. Unknown fields are errors.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rulesched.rules.cel import EngineName

KIND = "RuleTest"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expect(_Strict):
    """What a case asserts about the decision."""

    appliedRuleSets: list[str] | None = None
    """Exactly these rule sets apply to the pod (order-insensitive)."""
    feasible: list[str] | None = None
    """Exactly these nodes pass the filters (order-insensitive)."""
    rejected: dict[str, str] | None = None
    """Each node is rejected, with a reason containing the text ("" accepts any reason)."""
    best: str | None = None
    """The node ranked first (highest final score; ties broken by name)."""
    order: list[str] | None = None
    """The whole ranking of the passing nodes, best first."""
    scores: dict[str, Annotated[int, Field(ge=0, le=10)]] | None = None
    """Exact final scores (0..10) of passing nodes."""


class Case(_Strict):
    """One pod against the snapshot, and what the rules must decide."""

    name: Annotated[str, Field(min_length=1)]
    pod: str | dict[str, Any]
    nodes: str | None = None
    metrics: str | None = None
    pods: str | None = None
    namespaces: str | None = None
    now: datetime.datetime | None = None
    estimate: dict[str, float] | None = None
    """The pod's `estimate`, as the usage store would give it (default: the fallback, the pod's requests)."""
    expect: Expect


class RuleTestSpec(_Strict):
    rules: str | Annotated[list[str], Field(min_length=1)]
    nodes: str
    metrics: str | None = None
    pods: str | None = None
    namespaces: str | None = None
    celEngine: EngineName | None = None
    cases: Annotated[list[Case], Field(min_length=1)]


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: Annotated[str, Field(min_length=1)]


class RuleTest(_Strict):
    """One RuleTest document."""

    apiVersion: Literal["rulesched.io/v1alpha1"]
    kind: Literal["RuleTest"]
    metadata: Metadata
    spec: RuleTestSpec
