"""Pause/resume decisions and delete ordering (reference §5, §15)."""

from __future__ import annotations

import pytest

from planning.service.pause import (
    REFUSED_ALREADY_PAUSED,
    REFUSED_NO_WORK,
    REFUSED_NOT_PAUSED,
    DeleteStep,
    PauseMode,
    delete_steps,
    parse_pause_mode,
    permissions,
    replica_pause_fields,
    request_pause,
    request_resume,
)

pytestmark = pytest.mark.unit

R, F = PauseMode.RECOVER, PauseMode.FREEZE


@pytest.mark.parametrize(
    ("value", "mode"), [("true", R), ("freeze", F), ("True", None), ("", None), (None, None)]
)
def test_parse(value: str | None, mode: PauseMode | None) -> None:
    assert parse_pause_mode(value) == mode


@pytest.mark.parametrize(
    ("name", "current", "requested", "active", "mode", "refusal"),
    [
        ("pause active work", None, R, True, R, None),
        ("freeze active work", None, F, True, F, None),
        ("idle service refuses", None, R, False, None, REFUSED_NO_WORK),
        ("pause twice refuses", R, R, True, R, REFUSED_ALREADY_PAUSED),
        ("freeze is never downgraded", F, R, True, F, REFUSED_ALREADY_PAUSED),
        ("pause deepens to freeze", R, F, True, F, None),
    ],
)
def test_request_pause(
    name: str,
    current: PauseMode | None,
    requested: PauseMode,
    active: bool,
    mode: PauseMode | None,
    refusal: str | None,
) -> None:
    decision = request_pause(current, requested, active)
    assert (decision.mode, decision.refusal) == (mode, refusal), name


@pytest.mark.parametrize(("current", "refusal"), [(R, None), (F, None), (None, REFUSED_NOT_PAUSED)])
def test_request_resume(current: PauseMode | None, refusal: str | None) -> None:
    decision = request_resume(current)
    assert decision.mode is None and decision.refusal == refusal


def test_permissions() -> None:
    running = permissions(None)
    assert running.start_updates and running.create_instances and running.repairs and running.apply_spec
    paused = permissions(R)
    assert not paused.start_updates and not paused.create_instances and not paused.migrations
    assert paused.repairs and paused.scale_down and paused.delete and not paused.apply_spec
    frozen = permissions(F)
    assert not frozen.repairs and frozen.scale_down and frozen.delete


@pytest.mark.parametrize(
    ("mode", "fields"), [(None, (False, None)), (R, (True, "Recover")), (F, (True, "Freeze"))]
)
def test_replica_pause_fields(mode: PauseMode | None, fields: tuple[bool, str | None]) -> None:
    assert replica_pause_fields(mode) == fields


def test_delete_drains_before_deleting_and_removes_the_isvc_last() -> None:
    assert delete_steps(True, True) == [
        DeleteStep.DRAIN_INSTANCES,
        DeleteStep.DELETE_DEPLOYMENTS,
        DeleteStep.DELETE_SERVICES,
        DeleteStep.DELETE_REPLICAS,
        DeleteStep.DELETE_ISVC,
    ]
    assert delete_steps(False, True) == [
        DeleteStep.DELETE_DEPLOYMENTS,
        DeleteStep.DELETE_SERVICES,
        DeleteStep.DELETE_ISVC,
    ]
