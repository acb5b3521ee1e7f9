"""Every default the spec states, as the models expose it when a field is left out."""

from __future__ import annotations

import pytest

from models.inferenceservice import (
    GroupRollingUpdate,
    InferenceService,
    LifecycleSpec,
    MaintainRatio,
    RolloutGroup,
    RolloutSpec,
    UpdateStrategy,
)
from models.workloadcluster import KubeConfigSource, SecretReference

pytestmark = pytest.mark.unit

DEFAULT_ROWS = [
    ("instanceReadyTimeout is 30m", lambda: LifecycleSpec().effective_instance_ready_timeout, "30m"),
    ("update strategy is SurgeThenDrain", lambda: UpdateStrategy().effective_type, "SurgeThenDrain"),
    ("group progression is blue-green", lambda: RolloutGroup(components=["engine"]).progression, "blueGreen"),
    ("rolling update maxSurge is 25%", lambda: GroupRollingUpdate().effective_max_surge, "25%"),
    ("rolling update maxUnavailable is 25%", lambda: GroupRollingUpdate().effective_max_unavailable, "25%"),
    ("ratio tolerance is 5", lambda: MaintainRatio().effective_tolerance, 5),
    ("group ordering is Sequential", lambda: RolloutSpec().effective_group_ordering, "Sequential"),
    ("kubeconfig key is kubeconfig", lambda: KubeConfigSource(secret_ref=SecretReference(name="s")).effective_key, "kubeconfig"),
    ("namespace is default", lambda: InferenceService.model_validate({"metadata": {"name": "x"}}).namespace, "default"),
]


@pytest.mark.parametrize(("case", "read", "expected"), DEFAULT_ROWS, ids=[r[0] for r in DEFAULT_ROWS])
def test_default(case: str, read: object, expected: object) -> None:
    assert read() == expected  # type: ignore[operator]


def test_set_values_win_over_defaults() -> None:
    assert LifecycleSpec(instance_ready_timeout="45m").effective_instance_ready_timeout == "45m"
    assert GroupRollingUpdate(max_surge=1, max_unavailable=0).effective_max_unavailable == 0
    assert MaintainRatio(tolerance=0).effective_tolerance == 0
    assert RolloutGroup(components=["engine"], rolling_update=GroupRollingUpdate()).progression == "rollingUpdate"


def test_defaults_are_not_written_into_manifests() -> None:
    manifest = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "x"},
                "spec": {"engine": {"lifecycle": {}}, "rollout": {"groups": [{"components": ["engine"]}]}}}
    assert InferenceService.model_validate(manifest).to_manifest() == manifest
