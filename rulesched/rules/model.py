"""The rule file format `rulesched.io/v1alpha1`, kind `RuleSet` (docs/rules/language.md), as pydantic models.

Field names follow ValidatingAdmissionPolicy. Unknown fields are errors, so a typo such as
`failurPolicy` is reported at load time instead of being silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

API_VERSION = "rulesched.io/v1alpha1"

RuleSetName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")]
RuleName = Annotated[str, Field(pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")]
VariableName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")]
MAX_EXPRESSION_LENGTH = 10_000
"""Characters in one expression at most (cel-cpp's own limit is 100,000 code points)."""
Expression = Annotated[str, Field(min_length=1, max_length=MAX_EXPRESSION_LENGTH)]
Mode = Literal["Enforce", "Audit"]
Flag = Annotated[bool, Field(strict=True)]
"""A YAML boolean: `true`/`false`, not the string "yes" that lax parsing would accept."""


def _null_is_empty(value: object) -> object:
    # `filters:` with nothing under it (say, every entry commented out) is YAML null, not an error.
    return [] if value is None else value


def _rule_list(model: type) -> BeforeValidator:
    """A list of rules that may also be written as YAML null; the schema (`rulesched schema`) says so too."""
    return BeforeValidator(_null_is_empty, json_schema_input_type=list[model] | None)  # type: ignore[valid-type]


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
    audit: Flag = True
    """Whether the audit of running pods evaluates this filter (false: it matters at placement only)."""


class Score(_Strict):
    """A formula whose value ranks the nodes; larger is better."""

    name: RuleName
    expression: Expression
    weight: Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)] = 1.0
    normalize: Literal["MinMax", "Clamp"] = "MinMax"
    mode: Mode = "Enforce"


class Descheduling(_Strict):
    """What may be done about running pods that violate this rule set's filters (docs/guides/descheduling.md)."""

    action: Literal["Report", "Evict"] = "Report"
    filters: Annotated[list[RuleName], _rule_list(str)] = []
    """The Enforce filters whose violations count; empty: every audited Enforce filter of the rule set."""
    minAgeSeconds: Annotated[int, Field(ge=0, strict=True)] = 300
    """Pods placed more recently than this are left where they are."""
    maxEvictionsPerMinute: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] = 1.0
    """This rule set's eviction rate (the server's `--deschedule-rate` bounds them all together)."""


class RuleSetSpec(_Strict):
    matchConditions: Annotated[list[MatchCondition], _rule_list(MatchCondition)] = []
    variables: Annotated[list[Variable], _rule_list(Variable)] = []
    filters: Annotated[list[Filter], _rule_list(Filter)] = []
    scores: Annotated[list[Score], _rule_list(Score)] = []
    audit: Flag = True
    """Whether the audit of running pods evaluates this rule set's filters (false: none of them)."""
    descheduling: Descheduling | None = None

    @model_validator(mode="after")
    def _descheduled_filters_exist(self) -> RuleSetSpec:
        enforced = {f.name for f in self.filters if f.mode == "Enforce"}
        unknown = [name for name in (self.descheduling.filters if self.descheduling else []) if name not in enforced]
        if unknown:
            raise ValueError(f"descheduling.filters names no Enforce filter of this rule set: {', '.join(unknown)}")
        return self


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    name: RuleSetName


class RuleSet(_Strict):
    """One document of a rule file."""

    apiVersion: Literal["rulesched.io/v1alpha1"]
    kind: Literal["RuleSet"]
    metadata: Metadata
    spec: RuleSetSpec
