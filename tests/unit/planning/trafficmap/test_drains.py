"""§20's drains as tables: IDs, the annotation, refusals quoted verbatim, result rows, and
the `OverrideActive` condition."""

from __future__ import annotations

import pytest

from planning.trafficmap import texts
from planning.trafficmap.drains import (
    Drain,
    add,
    drain_refusal,
    id_problem,
    merged,
    override_condition,
    parse_annotation,
    remove,
    undrain_refusal,
)

pytestmark = pytest.mark.unit

B = Drain(cluster="worker-b", reason="upgrade")


@pytest.mark.parametrize(
    ("override_id", "ok"),
    [
        pytest.param("upgrade-42", True, id="letters digits hyphen"),
        pytest.param("a", True, id="one letter"),
        pytest.param("Upgrade", False, id="uppercase"),
        pytest.param("up_grade", False, id="underscore"),
        pytest.param("-up", False, id="leading hyphen"),
        pytest.param("up-", False, id="trailing hyphen"),
        pytest.param("", False, id="empty"),
        pytest.param("a" * 64, False, id="too long"),
    ],
)
def test_override_ids(override_id: str, ok: bool) -> None:
    assert (id_problem(override_id) is None) is ok


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(None, {}, id="no annotation"),
        pytest.param("", {}, id="empty"),
        pytest.param('{"maint": {"cluster": "worker-b", "reason": "upgrade"}}', {"maint": B}, id="one drain"),
        pytest.param('{"a": {"cluster": "worker-b"}, "b": {"cluster": "worker-b"}}',
                     {"a": Drain(cluster="worker-b"), "b": Drain(cluster="worker-b")}, id="two on one cluster"),
    ],
)
def test_annotation_parses(text: str | None, expected: dict[str, Drain]) -> None:
    assert parse_annotation(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{not json", id="not JSON"),
        pytest.param('["maint"]', id="a list"),
        pytest.param('{"Maint": {"cluster": "worker-b"}}', id="uppercase ID"),
        pytest.param('{"maint": {"reason": "x"}}', id="no cluster"),
        pytest.param('{"maint": {"cluster": "worker-b", "until": "x"}}', id="unknown field"),
        pytest.param('{"maint": "worker-b"}', id="not an object"),
    ],
)
def test_a_malformed_annotation_stops_the_map(text: str) -> None:
    with pytest.raises(ValueError, match=r"^parse ome\.io/traffic-drain: "):
        parse_annotation(text)


@pytest.mark.parametrize(
    ("in_force", "override_id", "cluster", "eligible", "refusal"),
    [
        pytest.param({}, "maint", "worker-b", True, None, id="accepted"),
        pytest.param({}, "maint", "worker-b", False, texts.NOT_ELIGIBLE, id="not routed"),
        pytest.param({}, "maint", "", True, texts.DRAIN_NEEDS_CLUSTER, id="no cluster"),
        pytest.param({"maint": B}, "maint", "worker-a", True, texts.DRAIN_ID_EXISTS, id="ID exists"),
    ],
)
def test_drain_refusals(in_force: dict[str, Drain], override_id: str, cluster: str, eligible: bool,
                        refusal: str | None) -> None:
    assert drain_refusal(in_force, override_id, cluster, eligible) == refusal


def test_refusal_texts_are_the_specs() -> None:
    assert texts.DRAIN_ID_EXISTS == "traffic drain refused: override ID already exists"
    assert texts.UNDRAIN_ID_MISSING == "traffic undrain refused: override ID does not exist"
    assert texts.NOT_ELIGIBLE == "traffic action refused: target is not eligible for cross-cluster traffic routing"
    assert texts.DRAIN_NEEDS_CLUSTER == (
        "traffic drain requires --workload-cluster; --cluster selects the Kubernetes API cluster"
    )


@pytest.mark.parametrize(
    ("signalled", "annotated", "override_id", "refusal"),
    [
        pytest.param({"maint": B}, {}, "maint", None, id="ours"),
        pytest.param({}, {}, "maint", texts.UNDRAIN_ID_MISSING, id="unknown"),
        pytest.param({}, {"maint": B}, "maint",
                     'traffic undrain refused: override ID "maint" is set by the ome.io/traffic-drain annotation; '
                     "remove it there", id="the annotation's"),
    ],
)
def test_undrain_refusals(signalled: dict[str, Drain], annotated: dict[str, Drain], override_id: str,
                          refusal: str | None) -> None:
    assert undrain_refusal(signalled, annotated, override_id, True) == refusal


def test_rows_count_the_drains_on_the_cluster() -> None:
    drains, row = add({}, {}, "first", B)
    assert (row.override_id, row.cluster, row.overrides) == ("first", "worker-b", "0 -> 1")
    annotated = {"ann": B}
    drains, row = add(drains, merged(drains, annotated), "second", B)
    assert row.overrides == "2 -> 3"
    drains, row = remove(drains, merged(drains, annotated), "first")
    assert row.overrides == "3 -> 2" and set(drains) == {"second"}


@pytest.mark.parametrize(
    ("in_force", "homes", "expected"),
    [
        pytest.param({}, {"worker-b"}, ("False", "NoOverrides"), id="none"),
        pytest.param({"maint": B}, {"worker-b"}, ("True", "OverridesApplied"), id="applied"),
        pytest.param({"maint": B}, {"worker-a"}, ("False", "OverridesPending"), id="names no current home"),
        pytest.param({"maint": B, "c": Drain(cluster="worker-c")}, {"worker-b"}, ("False", "OverridesPending"),
                     id="one of two pending"),
    ],
)
def test_override_condition(in_force: dict[str, Drain], homes: set[str], expected: tuple[str, str]) -> None:
    assert override_condition(in_force, homes)[:2] == expected


def test_a_malformed_annotation_refuses_drains_and_undrains() -> None:
    """§20: `traffic action refused: existing traffic-drain annotation is malformed or unsafe`."""
    assert texts.ANNOTATION_MALFORMED == (
        "traffic action refused: existing traffic-drain annotation is malformed or unsafe"
    )
    assert drain_refusal({}, "maint", "worker-b", True, malformed=True) == texts.ANNOTATION_MALFORMED
    assert undrain_refusal({"maint": B}, {}, "maint", True, malformed=True) == texts.ANNOTATION_MALFORMED
    # Not routed, or no cluster named, is said first.
    assert drain_refusal({}, "maint", "worker-b", False, malformed=True) == texts.NOT_ELIGIBLE
    assert drain_refusal({}, "maint", "", True, malformed=True) == texts.DRAIN_NEEDS_CLUSTER
