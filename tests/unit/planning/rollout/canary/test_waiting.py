"""What a canary waits for, as `explain` and `rollout status` say it: the step's gate and what
releases it, or what the phase waits for."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planning.rollout.canary.state import Failure
from planning.rollout.canary.waiting import CanaryWait, waiting
from tests.unit.planning.rollout.canary.rows import analysis, at, canary_of, entered, fresh

pytestmark = pytest.mark.unit

# The README's canary: analysis at 50%, a manual gate at 50%, then everything.
WALKTHROUGH = canary_of(
    {"capacity": "50%", "traffic": 50, "analysis": analysis()},
    {"capacity": "50%", "traffic": 50, "pause": {}},
    {"capacity": "100%", "traffic": 100},
)
TIMED = canary_of({"capacity": 1, "traffic": 10, "pause": {"duration": "5m"}}, {"capacity": "100%", "traffic": 100})


def test_at_a_manual_gate_promote_releases_it() -> None:
    assert waiting(WALKTHROUGH, entered(WALKTHROUGH, 1, at(0))) == CanaryWait(
        "Manual", "canary e2 step 2/3 waits at its manual gate (pause: {})", "promote"
    )


def test_under_analysis_it_counts_the_failed_samples() -> None:
    found = waiting(WALKTHROUGH, entered(WALKTHROUGH, 0, at(0), analysis_failed_checks=1))
    assert found == CanaryWait(
        "Analysis",
        "canary e2 step 1/3 is under analysis: 1 of failureLimit 2 samples failed",
        "a passing sample, or promote with override_analysis",
    )


def test_before_its_step_is_entered_it_waits_for_the_capacity() -> None:
    found = waiting(WALKTHROUGH, fresh())
    assert found is not None and found.gate == "Analysis"
    assert found.reason == "canary e2 step 1/3 waits for capacity 50% to serve on the new revision"
    held = waiting(WALKTHROUGH, replace(fresh(), pre_step_hold=True))
    assert held is not None and held.release == "promote naming revision e2"


def test_a_timed_gate_waits_for_its_pause() -> None:
    found = waiting(TIMED, entered(TIMED, 0, at(0)))
    assert found == CanaryWait("Timed", "canary e2 step 1/2 pauses for 5m", "the pause ending")


@pytest.mark.parametrize(
    "phase, reason, release",
    [
        ("RolledBack", "canary e2 rolled back to stable revision e1", "retry, or apply a newer revision"),
        ("RollingBack", "canary e2 is rolling back to stable revision e1", "its Instances back on the stable revision"),
        ("Failed", "canary e2 failed at step 1/3 (CapacityTimeout); its Instances and traffic stay", "retry or rollback"),
        ("Promoting", "canary e2 passed its last step and is promoting", "scaleDownDelaySeconds ending"),
    ],
)
def test_outside_its_steps_the_phase_says_what_it_waits_for(phase: str, reason: str, release: str) -> None:
    state = replace(entered(WALKTHROUGH, 0, at(0)), phase=phase, failed=Failure("CapacityTimeout", at(5)))
    assert waiting(WALKTHROUGH, state) == CanaryWait(None, reason, release)


def test_nothing_to_wait_for_once_stable_or_at_an_entered_immediate_step() -> None:
    assert waiting(WALKTHROUGH, replace(entered(WALKTHROUGH, 2, at(0)), phase="Stable")) is None
    assert waiting(WALKTHROUGH, entered(WALKTHROUGH, 2, at(0))) is None
