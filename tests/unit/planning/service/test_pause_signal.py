"""The InferenceService `pause` / `resume` signals (spec reference §5): every input, every depth."""

from __future__ import annotations

import pytest

from planning.service.pause import REFUSED_ALREADY_PAUSED, REFUSED_NOT_PAUSED, PauseMode
from planning.service.pause_signal import (
    PAUSE_REFUSED,
    PAUSED,
    RESUME_REFUSED,
    RESUMED,
    discards_pending,
    on_pause,
    on_resume,
    pause_mode_of,
    replica_pause_mode,
)

pytestmark = pytest.mark.unit

TRUE, FREEZE = PauseMode.RECOVER, PauseMode.FREEZE


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, TRUE),
        ("true", TRUE),
        (True, TRUE),
        ("freeze", FREEZE),
        ("True", None),
        ("FREEZE", None),
        ("", None),
        ("false", None),
        (False, None),
        (1, None),
        ({"mode": "freeze"}, FREEZE),  # the structured input (with discard_pending_actions)
        ({"depth": "freeze"}, None),
    ],
)
def test_only_the_annotation_values_are_a_pause(value: object, mode: PauseMode | None) -> None:
    assert pause_mode_of(value) == mode


@pytest.mark.parametrize(
    ("name", "current", "value", "after", "reason", "message"),
    [
        ("pause", None, None, TRUE, PAUSED, "rollout paused (true)"),
        ("freeze", None, "freeze", FREEZE, PAUSED, "rollout paused (freeze)"),
        ("deepen true to freeze", TRUE, "freeze", FREEZE, PAUSED, "rollout paused (freeze)"),
        ("freeze is never downgraded", FREEZE, None, FREEZE, PAUSE_REFUSED, REFUSED_ALREADY_PAUSED),
        ("freeze again", FREEZE, "freeze", FREEZE, PAUSE_REFUSED, REFUSED_ALREADY_PAUSED),
        ("true again", TRUE, None, TRUE, PAUSE_REFUSED, REFUSED_ALREADY_PAUSED),
    ],
)
def test_pause(
    name: str, current: PauseMode | None, value: object, after: PauseMode | None, reason: str, message: str
) -> None:
    outcome = on_pause(current, value)
    assert outcome.mode == after, name
    assert outcome.event[:2] == (reason, message), name
    assert outcome.event[2] == ("Warning" if reason == PAUSE_REFUSED else "Normal")


@pytest.mark.parametrize("current", [None, TRUE, FREEZE])
def test_a_value_that_is_not_a_pause_changes_nothing_and_says_how_to_fix_it(
    current: PauseMode | None,
) -> None:
    outcome = on_pause(current, "True")
    assert outcome.mode == current
    reason, message, kind = outcome.event
    assert reason == PAUSE_REFUSED and kind == "Warning"
    assert message == (
        'action refused: pause value "True" is not a pause; send the pause signal with no input '
        'for a fleet-change pause (true), or with input "freeze" to stop repairs too'
    )


def test_a_non_string_value_is_named_as_json() -> None:
    assert "pause value false is not a pause" in on_pause(None, False).event[1]


@pytest.mark.parametrize(("current", "shown"), [(TRUE, "true"), (FREEZE, "freeze")])
def test_resume_removes_either_depth(current: PauseMode, shown: str) -> None:
    outcome = on_resume(current)
    assert outcome.mode is None and outcome.event == (RESUMED, f"rollout resumed (was {shown})", "Normal")


def test_resume_without_a_pause_is_refused() -> None:
    assert on_resume(None).event == (RESUME_REFUSED, REFUSED_NOT_PAUSED, "Warning")


@pytest.mark.parametrize(("mode", "projected"), [(None, None), (TRUE, "Recover"), (FREEZE, "Freeze")])
def test_projected_pause_mode(mode: PauseMode | None, projected: str | None) -> None:
    assert replica_pause_mode(mode) == projected


@pytest.mark.parametrize(
    "value, mode, discards",
    [
        ({"mode": "true", "discard_pending_actions": True}, PauseMode.RECOVER, True),
        ({"mode": "freeze", "discard_pending_actions": True}, PauseMode.FREEZE, True),
        ({"discard_pending_actions": True}, PauseMode.RECOVER, True),
        ({"mode": "freeze"}, PauseMode.FREEZE, False),
        ({"mode": "true", "discard": True}, None, False),  # an unknown key is not a pause
        ({"mode": "True", "discard_pending_actions": True}, None, True),
    ],
)
def test_a_pause_may_also_discard_pending_canary_requests(value: object, mode: PauseMode | None, discards: bool) -> None:
    assert pause_mode_of(value) == mode
    assert discards_pending(value) is discards
