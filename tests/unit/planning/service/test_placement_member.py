"""The member copy of a multi-cluster InferenceService for one home (§16)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from models.admission import admit
from planning.service.placement_member import member_manifest, placement_source

pytestmark = pytest.mark.unit

SOURCE: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {
        "name": "chat",
        "namespace": "prod",
        "uid": "3f1c-uid",
        "generation": 6,
        "resourceVersion": "812",
        "finalizers": ["ome.io/trafficmap-publisher"],
        "labels": {"team": "ml"},
        "annotations": {
            "ome.io/traffic-drain": '{"m1": {"cluster": "worker-a", "reason": "maint"}}',
            "ome.io/global-host": "chat.example.com",
            "ome.io/cluster-selector": "gpu=a100",
            "note": "kept",
        },
    },
    "spec": {
        "model": {"name": "llama-3-1-8b-instruct"},
        "runtime": {"name": "srt-llama-3-1-8b-instruct"},
        "engine": {"minReplicas": 2, "maxReplicas": 4, "runner": {"image": "srt:1"}},
        "placement": {"policy": "ClusterAffinity", "mode": "Split", "split": {"replicas": 3}},
        "routing": {"capacityFactors": {"worker-b": "3"}},
    },
    "status": {"placement": {"phase": "Placed"}},
}


def test_member_copy_without_override() -> None:
    member = member_manifest(SOURCE, "worker-a", None)
    assert member == {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": "chat",
            "namespace": "prod",
            "labels": {"team": "ml", "ome.io/placement-source": "3f1c-uid", "ome.io/placement-cluster": "worker-a"},
            "annotations": {"note": "kept"},
        },
        "spec": {
            "model": {"name": "llama-3-1-8b-instruct"},
            "runtime": {"name": "srt-llama-3-1-8b-instruct"},
            "engine": {"minReplicas": 2, "maxReplicas": 4, "runner": {"image": "srt:1"}},
        },
    }
    assert admit(member).allowed


def test_split_home_runs_its_share() -> None:
    member = member_manifest(SOURCE, "worker-b", 1)
    assert member["spec"]["engine"] == {"minReplicas": 1, "maxReplicas": 1, "runner": {"image": "srt:1"}}
    assert member["metadata"]["labels"]["ome.io/placement-cluster"] == "worker-b"


def test_override_without_engine_block() -> None:
    source = copy.deepcopy(SOURCE)
    del source["spec"]["engine"]
    assert member_manifest(source, "worker-a", 3)["spec"]["engine"] == {"minReplicas": 3, "maxReplicas": 3}


def test_source_is_untouched_and_copy_is_independent() -> None:
    before = copy.deepcopy(SOURCE)
    member = member_manifest(SOURCE, "worker-a", 1)
    member["spec"]["model"]["name"] = "changed"
    assert SOURCE == before


def test_uid_given_explicitly_or_required() -> None:
    source = copy.deepcopy(SOURCE)
    del source["metadata"]["uid"]
    assert member_manifest(source, "worker-a", None, source_uid="u-2")["metadata"]["labels"][
        "ome.io/placement-source"] == "u-2"
    with pytest.raises(ValueError, match="'chat' has no metadata.uid"):
        member_manifest(source, "worker-a", None)


def test_placement_source() -> None:
    assert placement_source(member_manifest(SOURCE, "worker-a", None)) == "3f1c-uid"
    assert placement_source(SOURCE) is None
    assert placement_source({}) is None
