"""What the InferenceService shows of its rollout runs: conditions and `status.rollout`."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from models.inferenceservice import RolloutSpec
from planning.rollout.plan import plan_digest
from planning.service.rollout import RunSeen, conditions, live_digest, rollout_status, run_change

pytestmark = pytest.mark.unit

STARTED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BLUE_GREEN = RolloutSpec.model_validate({"groups": [{"components": ["engine", "decoder"]}]})
PINNED = plan_digest(["rp1:cca45ec1fb0f"])
RUN = RunSeen(3, STARTED, {"engine": "e2", "decoder": "d2"}, PINNED, ["rp1:cca45ec1fb0f"], ["Progressing"])


def shown(found: list) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in found]


@pytest.mark.parametrize(
    "run, spec, expected",
    [
        (None, BLUE_GREEN, [("RolloutPlanReady", "True", "NoActiveRun"), ("RolloutPlanDrift", "False", "InSync")]),
        (replace(RUN, outcome="Completed"), BLUE_GREEN, [("RolloutPlanReady", "True", "NoActiveRun"), ("RolloutPlanDrift", "False", "InSync")]),
        (RUN, BLUE_GREEN, [("RolloutPlanReady", "True", "Pinned"), ("RolloutPlanDrift", "False", "InSync")]),
        (
            RUN,
            RolloutSpec.model_validate({"groups": [{"components": ["engine", "decoder"], "rollingUpdate": {}}]}),
            [("RolloutPlanReady", "True", "Pinned"), ("RolloutPlanDrift", "True", "SpecNewerThanRun")],
        ),
        (
            replace(RUN, plan_digest=None, parked_reason="PolicyNotFound", parked_message="policy not found"),
            BLUE_GREEN,
            [("RolloutPlanReady", "False", "PolicyNotFound"), ("RolloutPlanDrift", "False", "InSync")],
        ),
        (
            RunSeen(3, None, {"engine": "e2"}, None, [], []),
            BLUE_GREEN,
            [("RolloutPlanReady", "Unknown", "Opening"), ("RolloutPlanDrift", "False", "InSync")],
        ),
    ],
    ids=["no run", "closed run", "pinned", "spec edited during the run", "parked", "opening"],
)
def test_plan_conditions(run: RunSeen | None, spec: RolloutSpec, expected: list[tuple[str, str, str]]) -> None:
    assert shown(conditions(run, spec)) == expected


def test_drift_names_both_digests() -> None:
    edited = RolloutSpec.model_validate({"groups": [{"components": ["engine", "decoder"], "rollingUpdate": {}}]})
    (_, drift) = conditions(RUN, edited)
    assert f"differs from pinned {PINNED}" in drift.message and live_digest(edited) in drift.message


def test_status_rollout_pins_the_active_run_and_drops_it_once_closed() -> None:
    assert rollout_status(None) is None
    assert rollout_status(RUN) == {
        "activeRun": {
            "id": "3",
            "startedAt": "2026-12-01T12:00:00Z",
            "targetRevisions": {"engine": "e2", "decoder": "d2"},
            "planDigest": PINNED,
        },
        "groups": [{"observedDigest": "rp1:cca45ec1fb0f", "phase": "Progressing"}],
    }
    closed = rollout_status(replace(RUN, outcome="Completed", group_phases=["Succeeded"]))
    assert closed == {"activeRun": None, "groups": [{"observedDigest": "rp1:cca45ec1fb0f", "phase": "Succeeded"}]}


def test_asking_again_for_what_serves_supersedes_the_run_and_opens_none() -> None:
    """Seed 004: "a fixed image or the previous one" makes a failed component healthy."""
    change = run_change({}, {"engine": "e2", "decoder": "d2"}, None, {"engine": "e1", "decoder": "d2"})
    assert (change.open, change.supersede) == ({}, True)
    unchanged = run_change({"engine": "e2", "decoder": "d2"}, {"engine": "e2", "decoder": "d2"}, None, {"engine": "e2", "decoder": "d2"})
    assert (unchanged.open, unchanged.supersede) == ({}, False)


@pytest.mark.parametrize(
    "asked, active, last, opens, supersede",
    [
        ({}, None, None, {}, False),
        ({"engine": "e2"}, None, None, {"engine": "e2"}, False),
        # The run moves them already, or one finished and dropped out of what is asked.
        ({"engine": "e2", "decoder": "d2"}, {"engine": "e2", "decoder": "d2"}, None, {}, False),
        ({"engine": "e2"}, {"engine": "e2", "decoder": "d2"}, None, {}, False),
        # A newer image during the run.
        ({"engine": "e3", "decoder": "d2"}, {"engine": "e2", "decoder": "d2"}, None, {"engine": "e3", "decoder": "d2"}, True),
        # The closed run's component has not flipped its current revision yet: no new run.
        ({"engine": "e2"}, None, {"engine": "e2", "decoder": "d2"}, {}, False),
        # Back to the previous image after the run completed: a new run.
        ({"engine": "e1"}, None, {"engine": "e2"}, {"engine": "e1"}, False),
    ],
    ids=["nothing asked", "first change", "same run", "one finished", "superseded", "flipping", "rollback"],
)
def test_when_runs_open_and_close(
    asked: dict[str, str], active: dict[str, str] | None, last: dict[str, str] | None, opens: dict[str, str], supersede: bool
) -> None:
    change = run_change(asked, active, last)
    assert (change.open, change.supersede) == (opens, supersede)
