"""Which Instance spec changes are lifecycle-only (planning.replica.lifecycle)."""

from __future__ import annotations

from typing import Any

import pytest

from models.instance import InstanceSpec, RestartPolicy
from planning.replica.lifecycle import LIFECYCLE_FIELDS, lifecycle_digest

BASE = InstanceSpec(
    namespace="default",
    isvc="qwen",
    component="engine",
    index=0,
    revision="aaaa1111",
    leader_pod_spec={"containers": [{"name": "ome-container", "image": "img:1"}]},
)


@pytest.mark.parametrize(
    "change",
    [
        {"restart_policy": RestartPolicy.RECREATE_INSTANCE_ON_POD_RESTART},
        {"instance_ready_timeout_seconds": 2700.0},
        {"drain_seconds": 30.0},
        {"min_ready_seconds": 10.0},
        {"teardown_deadline_seconds": None},
    ],
)
def test_a_lifecycle_setting_changes_the_digest(change: dict[str, Any]) -> None:
    assert lifecycle_digest(BASE.model_copy(update=change)) != lifecycle_digest(BASE)


@pytest.mark.parametrize(
    "change",
    [
        {"index": 7},
        {"revision": "bbbb2222", "revision_name": "qwen-engine-rev-bbbb2222"},
        {"leader_pod_spec": {"containers": [{"name": "ome-container", "image": "img:2"}]}},
        {"labels": {"team": "a"}},
    ],
)
def test_identity_and_pod_template_do_not(change: dict[str, Any]) -> None:
    assert lifecycle_digest(BASE.model_copy(update=change)) == lifecycle_digest(BASE)


def test_every_lifecycle_field_is_a_spec_field() -> None:
    assert LIFECYCLE_FIELDS <= set(InstanceSpec.model_fields)
