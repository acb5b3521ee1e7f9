"""Which WorkloadClusters a placement's selectors match (reference §16).

Two forms select clusters:
- `clusterAffinity[]`: terms are ORed, the requirements inside a term (its `matchFields` and
  `matchExpressions` together) ANDed. `matchFields` knows one field, the virtual
  `metadata.name` (the WorkloadCluster's name); `matchExpressions` match the cluster's labels
  with `In`, `NotIn`, `Exists`, `DoesNotExist`.
- the legacy label-selector strings (`requirements`, `clusterSelector`, or the annotations
  `ome.io/accelerator-requirements` / `ome.io/cluster-selector`), in Kubernetes' grammar:
  `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, clauses separated by commas
  and ANDed. The key `metadata.name` there is the virtual field too.

As in Kubernetes, `NotIn` and `!=` match a cluster that lacks the label.

Public API: `Requirement`, `SelectorError`, `parse_selector(text, where)`,
`from_model(requirement)`, `term_requirements(term, index)`, `unmet(requirements, name, labels)`,
`NAME_FIELD`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from models.inferenceservice import ClusterAffinityTerm, SelectorRequirement

NAME_FIELD = "metadata.name"
"""The virtual field a selector uses to name a WorkloadCluster."""

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_ABSENT = re.compile(rf"!\s*(?P<key>{_KEY})")
_SET = re.compile(rf"(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")
_EQUALITY = re.compile(rf"(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})")
_PRESENT = re.compile(_KEY)


class SelectorError(ValueError):
    """A selector string that does not parse; the message names where it was written."""


@dataclass(frozen=True)
class Requirement:
    """One requirement: `key operator values`; `field` when `key` is a field, not a label."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False

    def describe(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} [{', '.join(self.values)}]"


def _clauses(text: str) -> list[str]:
    """Split at the commas outside parentheses."""
    parts: list[str] = []
    depth, start = 0, 0
    for position, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:position])
            start = position + 1
    parts.append(text[start:])
    return [part.strip() for part in parts]


def _clause(clause: str) -> Requirement | None:
    absent = _ABSENT.fullmatch(clause)
    if absent:
        return Requirement(absent["key"], "DoesNotExist")
    in_set = _SET.fullmatch(clause)
    if in_set:
        values = tuple(sorted({v.strip() for v in in_set["values"].split(",") if v.strip()}))
        if not values or not all(re.fullmatch(_VALUE, v) for v in values):
            return None
        return Requirement(in_set["key"], "In" if in_set["op"] == "in" else "NotIn", values)
    equality = _EQUALITY.fullmatch(clause)
    if equality:
        return Requirement(equality["key"], "NotIn" if equality["op"] == "!=" else "In", (equality["value"],))
    if _PRESENT.fullmatch(clause):
        return Requirement(clause, "Exists")
    return None


def parse_selector(text: str, where: str) -> list[Requirement]:
    """The requirements of a label-selector string; an empty string selects everything."""
    if not text.strip():
        return []
    found: list[Requirement] = []
    for clause in _clauses(text):
        requirement = _clause(clause)
        if requirement is None:
            raise SelectorError(
                f'{where}: cannot parse "{clause}" in selector "{text}"; use forms like "gpu=a100", '
                '"tier in (a,b)", "!spot" or "metadata.name notin (worker-c)"'
            )
        found.append(Requirement(requirement.key, requirement.operator, requirement.values,
                                 field=requirement.key == NAME_FIELD))
    return found


def from_model(requirement: SelectorRequirement, field: bool = False) -> Requirement:
    return Requirement(requirement.key, requirement.operator, tuple(requirement.values or ()), field)


def term_requirements(term: ClusterAffinityTerm, index: int) -> list[Requirement]:
    """A term's requirements; a `matchFields` key other than `metadata.name` is refused."""
    for position, requirement in enumerate(term.match_fields or []):
        if requirement.key != NAME_FIELD:
            raise SelectorError(
                f"spec.placement.clusterAffinity[{index}].matchFields[{position}]: field "
                f'"{requirement.key}" is not supported; matchFields selects only {NAME_FIELD}'
            )
    return [from_model(r, field=True) for r in term.match_fields or []] + [
        from_model(r) for r in term.match_expressions or []
    ]


def _holds(requirement: Requirement, name: str, labels: Mapping[str, str]) -> bool:
    value = name if requirement.field else labels.get(requirement.key)
    if requirement.operator == "Exists":
        return value is not None
    if requirement.operator == "DoesNotExist":
        return value is None
    inside = value is not None and value in requirement.values
    return inside if requirement.operator == "In" else not inside


def unmet(requirements: Sequence[Requirement], name: str, labels: Mapping[str, str]) -> Requirement | None:
    """The first requirement the cluster fails, or None when it meets them all."""
    return next((r for r in requirements if not _holds(r, name, labels)), None)
