"""Cluster selectors of a placement: the legacy string grammar and clusterAffinity terms."""

from __future__ import annotations

import pytest

from models.inferenceservice import ClusterAffinityTerm, SelectorRequirement
from planning.service.placement_selector import (
    Requirement,
    SelectorError,
    parse_selector,
    term_requirements,
    unmet,
)

pytestmark = pytest.mark.unit

WHERE = "spec.placement.clusterSelector"
LABELS = {"gpu": "a100", "region": "eu"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("   ", []),
        ("gpu=a100", [Requirement("gpu", "In", ("a100",))]),
        ("gpu==a100", [Requirement("gpu", "In", ("a100",))]),
        ("gpu!=t4", [Requirement("gpu", "NotIn", ("t4",))]),
        ("gpu=", [Requirement("gpu", "In", ("",))]),
        ("tier in (b, a)", [Requirement("tier", "In", ("a", "b"))]),
        ("tier notin (a)", [Requirement("tier", "NotIn", ("a",))]),
        ("spot", [Requirement("spot", "Exists")]),
        ("!spot", [Requirement("spot", "DoesNotExist")]),
        ("ome.io/region=eu", [Requirement("ome.io/region", "In", ("eu",))]),
        (
            "a=b,c in (x,y),!d",
            [Requirement("a", "In", ("b",)), Requirement("c", "In", ("x", "y")), Requirement("d", "DoesNotExist")],
        ),
        ("metadata.name in (worker-a)", [Requirement("metadata.name", "In", ("worker-a",), field=True)]),
        ("metadata.name!=worker-c", [Requirement("metadata.name", "NotIn", ("worker-c",), field=True)]),
    ],
)
def test_parse_selector(text: str, expected: list[Requirement]) -> None:
    assert parse_selector(text, WHERE) == expected


@pytest.mark.parametrize("text", ["a=b,", "tier in ()", "tier in (a", "a b", "=b", "a=b=c", "!", "tier in (a b)"])
def test_unparsable_selector_names_where_and_clause(text: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_selector(text, WHERE)
    assert str(caught.value).startswith(f"{WHERE}: cannot parse ")
    assert f'in selector "{text}"' in str(caught.value)


@pytest.mark.parametrize(
    ("selector", "name", "meets"),
    [
        ("gpu=a100", "worker-a", True),
        ("gpu=h100", "worker-a", False),
        ("gpu!=h100", "worker-a", True),
        ("zone!=x", "worker-a", True),  # NotIn matches a cluster without the label
        ("zone notin (x)", "worker-a", True),
        ("zone in (x)", "worker-a", False),
        ("gpu", "worker-a", True),
        ("zone", "worker-a", False),
        ("!zone", "worker-a", True),
        ("!gpu", "worker-a", False),
        ("metadata.name=worker-a", "worker-a", True),
        ("metadata.name in (worker-b, worker-c)", "worker-a", False),
        ("metadata.name notin (worker-b)", "worker-a", True),
        ("gpu=a100,region=us", "worker-a", False),
        ("gpu=a100,region in (eu,us)", "worker-a", True),
    ],
)
def test_unmet(selector: str, name: str, meets: bool) -> None:
    assert (unmet(parse_selector(selector, WHERE), name, LABELS) is None) is meets


def test_unmet_names_the_first_failing_requirement() -> None:
    failing = unmet(parse_selector("gpu=a100,region=us,!gpu", WHERE), "worker-a", LABELS)
    assert failing is not None and failing.describe() == "region In [us]"


def test_term_joins_fields_and_expressions() -> None:
    term = ClusterAffinityTerm(
        match_fields=[SelectorRequirement(key="metadata.name", operator="In", values=["worker-a"])],
        match_expressions=[SelectorRequirement(key="gpu", operator="Exists")],
    )
    assert term_requirements(term, 0) == [
        Requirement("metadata.name", "In", ("worker-a",), field=True),
        Requirement("gpu", "Exists"),
    ]


def test_term_match_fields_knows_only_metadata_name() -> None:
    term = ClusterAffinityTerm(match_fields=[SelectorRequirement(key="metadata.labels", operator="Exists")])
    with pytest.raises(SelectorError) as caught:
        term_requirements(term, 2)
    assert str(caught.value) == (
        'spec.placement.clusterAffinity[2].matchFields[0]: field "metadata.labels" is not supported; '
        "matchFields selects only metadata.name"
    )


def test_a_label_named_like_the_field_is_a_label_in_match_expressions() -> None:
    term = ClusterAffinityTerm(
        match_expressions=[SelectorRequirement(key="metadata.name", operator="In", values=["worker-a"])]
    )
    assert unmet(term_requirements(term, 0), "worker-a", {}) is not None
