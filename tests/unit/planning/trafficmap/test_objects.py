"""The TrafficMap object the workflow writes: owner, finalizer, status, and the owner check
that stops the map (§17)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models.trafficmap import EntryProbe, TrafficMapEntry, TrafficMapSpec
from planning.trafficmap import texts
from planning.trafficmap.objects import (
    change_key,
    map_manifest,
    map_status,
    owner_problem,
    publication_fallback_condition,
    published_condition,
)
from planning.trafficmap.state import Publication

pytestmark = pytest.mark.unit


def test_the_manifest_is_owned_held_and_has_no_status() -> None:
    manifest = map_manifest("prod", "chat", "uid-1", TrafficMapSpec(service="chat"))
    metadata = manifest["metadata"]
    assert (manifest["apiVersion"], manifest["kind"], metadata["name"], metadata["namespace"]) == (
        "ome.io/v1beta1", "TrafficMap", "chat", "prod"
    )
    assert metadata["finalizers"] == ["ome.io/trafficmap-publisher"]
    assert metadata["ownerReferences"] == [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "chat",
                                            "uid": "uid-1", "controller": True, "blockOwnerDeletion": True}]
    assert "status" not in manifest
    assert "ownerReferences" not in map_manifest("prod", "chat", "", TrafficMapSpec(service="chat"))["metadata"]


def test_status_fields() -> None:
    publication = Publication(reason="Published", published=True, observed_generation=4,
                              gateway_namespace="gateways", gateway_name="global")
    status = map_status("uid-1", publication, [])
    assert status == {"sourceUID": "uid-1", "published": True, "observedTrafficMapGeneration": 4,
                      "gatewayRef": {"namespace": "gateways", "name": "global"}, "publisher": "gatewayapi",
                      "conditions": []}


@pytest.mark.parametrize(
    ("publication", "frozen", "expected"),
    [
        pytest.param(Publication(reason="Published", message=texts.PUBLISHED_MESSAGE, published=True), [],
                     ("True", "Published", 'TrafficMap is published by publisher "gatewayapi"'), id="published"),
        pytest.param(Publication(reason="Withdrawn", message="no gateway"), [], ("False", "Withdrawn", "no gateway"),
                     id="withdrawn"),
        pytest.param(Publication(reason="Published", published=True), ["validate routing policy: x"],
                     ("False", "InvalidOwner", "validate routing policy: x"), id="stopped"),
    ],
)
def test_published_condition(publication: Publication, frozen: list[str], expected: tuple[str, str, str]) -> None:
    assert published_condition(publication, frozen) == expected


@pytest.mark.parametrize(
    ("owners", "problem"),
    [
        pytest.param(None, None, id="no object yet"),
        pytest.param([{"uid": "uid-1", "controller": True}], None, id="ours"),
        pytest.param([], None, id="nobody's: adopted"),
        pytest.param([{"uid": "uid-2", "controller": True}],
                     "TrafficMap prod/chat exists but is not controlled by InferenceService UID uid-1", id="another's"),
    ],
)
def test_owner_check(owners: list[dict[str, object]] | None, problem: str | None) -> None:
    existing = None if owners is None else {"metadata": {"ownerReferences": owners}}
    assert owner_problem(existing, "prod", "chat", "uid-1") == problem


def test_a_new_probe_time_alone_is_no_change_worth_writing() -> None:
    def manifest(second: int, gated: bool = False) -> dict[str, object]:
        probe = EntryProbe(result="Passing", gated=gated, last_probe_time=datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC))
        spec = TrafficMapSpec(service="chat", entries=[TrafficMapEntry(cluster="a", probe=probe)])
        return map_manifest("prod", "chat", "uid-1", spec)

    assert change_key(manifest(1)) == change_key(manifest(2))
    assert change_key(manifest(1)) != change_key(manifest(1, gated=True))


@pytest.mark.parametrize(
    ("publication", "expected"),
    [
        pytest.param(Publication(reason="Published", published=True), ("False", "Unsupported"), id="after success"),
        pytest.param(Publication(reason="ApplyFailed", message="x"), ("Unknown", "ApplyFailed"), id="failing"),
        pytest.param(Publication(), ("Unknown", "Transitioning"), id="publishing"),
    ],
)
def test_publication_fallback(publication: Publication, expected: tuple[str, str]) -> None:
    assert publication_fallback_condition(publication)[:2] == expected
