"""Pause/resume decisions (reference §5)."""

from __future__ import annotations

import pytest

from planning.service.pause import (
    REFUSED_ALREADY_PAUSED,
    REFUSED_NO_WORK,
    REFUSED_NOT_PAUSED,
    PauseMode,
    parse_pause_mode,
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
