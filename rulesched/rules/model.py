"""The rule file format `rulesched.io/v1alpha1`, kind `RuleSet` (docs/rules/language.md), as pydantic models.

Field names follow ValidatingAdmissionPolicy. Unknown fields are errors, so a typo such as
`failurPolicy` is reported at load time instead of being silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

API_VERSION = "rulesched.io/v1alpha1"

RuleSetName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]
RuleName = Annotated[str, Field(pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")]
VariableName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")]
Expression = Annotated[str, Field(min_length=1, max_length=10_000)]
Mode = Literal["Enforce", "Audit"]
Flag = Annotated[bool, Field(strict=True)]
"""A YAML boolean: `true`/`false`, not the string "yes" that lax parsing would accept."""


def _null_is_empty(value: object) -> object:
    # `filters:` with nothing under it (say, every entry commented out) is YAML null, not an error.
    return [] if value is None else value


RuleList = BeforeValidator(_null_is_empty)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatchCondition(_Strict):
    """A CEL condition over `pod` and `now`; the rule set applies when all are true."""

    name: RuleName
    expression: Expression


class Variable(_Strict):
    """A value computed per pod and node, read by later expressions as `variables.<name>`."""

    name: VariableName
    expression: Expression


class Filter(_Strict):
    """A predicate a node must satisfy; `message` is the reason kube-scheduler shows."""

    name: RuleName
    expression: Expression
    message: str = ""
    messageExpression: str = ""
    resolvableByPreemption: Flag = False
    failurePolicy: Literal["Fail", "Ignore"] = "Fail"
    mode: Mode = "Enforce"


class Score(_Strict):
    """A formula whose value ranks the nodes; larger is better."""

    name: RuleName
    expression: Expression
    weight: Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)] = 1.0
    normalize: Literal["MinMax", "Clamp"] = "MinMax"
    mode: Mode = "Enforce"


class RuleSetSpec(_Strict):
    matchConditions: Annotated[list[MatchCondition], RuleList] = []
    variables: Annotated[list[Variable], RuleList] = []
    filters: Annotated[list[Filter], RuleList] = []
    scores: Annotated[list[Score], RuleList] = []


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: RuleSetName


class RuleSet(_Strict):
    """One document of a rule file."""

    apiVersion: Literal["rulesched.io/v1alpha1"]
    kind: Literal["RuleSet"]
    metadata: Metadata
    spec: RuleSetSpec
