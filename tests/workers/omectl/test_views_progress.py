"""Table tests of `omectl get isvc`'s row and `apply --wait`'s progress line and timeout reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.inferencereplica import Condition, RolloutHoldRow
from models.isvc_status import CanaryStatus, ComponentStatus, InferenceServiceStatus, LifecycleStatus
from workers.omectl.views.isvc import isvc_table
from workers.omectl.views.progress import progress
from workflows.service.messages import ServiceStatusView

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
BUDGET = RolloutHoldRow(gate="Budget", reason="per-Component surge budget 1 exhausted (would become 2)")


def view(
    ready: str | None = "True",
    observed: int = 1,
    generation: int = 1,
    pause: str | None = None,
    **components: ComponentStatus,
) -> ServiceStatusView:
    conditions = [] if ready is None else [Condition(type="Ready", status=ready, reason="Why", message="because")]  # type: ignore[arg-type]
    return ServiceStatusView(
        name="qwen3-0-6b",
        namespace="spread-demo",
        generation=generation,
        phase="Ready" if ready == "True" else "Updating",
        paused=pause is not None,
        pause=pause,
        deleting=False,
        status=InferenceServiceStatus(observed_generation=observed, conditions=conditions, components=components),
    )


def engine(serving: int, replicas: int, hold: RolloutHoldRow | None = None, **fields: object) -> ComponentStatus:
    return ComponentStatus(
        lifecycle=LifecycleStatus(serving_replicas=serving, replicas=replicas, rollout_hold=hold),
        **fields,  # type: ignore[arg-type]
    )


def test_get_isvc_row() -> None:
    shown = isvc_table([(view(engine=engine(2, 2)), NOW - timedelta(seconds=30))], NOW).render().splitlines()
    assert shown[0].split() == ["NAME", "PHASE", "GENERATION", "READY", "PAUSED", "COMPONENTS", "AGE"]
    assert shown[1].split() == ["qwen3-0-6b", "Ready", "1", "True", "false", "engine=2/2", "30s"]


def test_get_isvc_wide_shows_rollout_phase_and_hold() -> None:
    status = view("Unknown", pause="freeze", engine=engine(1, 2, BUDGET, rollout_phase="Canarying"), router=engine(1, 1))
    row = isvc_table([(status, None)], NOW, wide=True).rows[0]
    assert row == ("qwen3-0-6b", "Updating", "1", "Unknown", "freeze", "engine=1/2,router=1/1", "-", "engine=Canarying", "engine=Budget")


@pytest.mark.parametrize(
    ("status", "generation", "ready", "line"),
    [
        (view(engine=engine(2, 2)), 1, True, "generation 1 (Ready): engine 2/2 serving"),
        (view(observed=1, generation=2, engine=engine(2, 2)), 2, False, "generation 2 (Ready): engine 2/2 serving"),
        (view("False", engine=engine(0, 0)), 1, False, "generation 1 (Updating): engine 0/2 serving"),
        (view("Unknown", engine=engine(1, 2, BUDGET)), 1, False, "generation 1 (Updating): engine 1/2 serving, held at Budget"),
        (
            view("Unknown", engine=engine(2, 2, rollout_phase="Paused", canary=CanaryStatus(current_step=1))),
            1,
            False,
            "generation 1 (Updating): engine 2/2 serving, canary step 2 Paused",
        ),
        (view(None), 1, False, "generation 1 (Updating): no component reported yet"),
    ],
    ids=["ready", "older-generation", "none-serving", "held", "canary", "nothing-yet"],
)
def test_progress_line(status: ServiceStatusView, generation: int, ready: bool, line: str) -> None:
    shown = progress(status, generation, {"engine": 2})
    assert (shown.ready, shown.line) == (ready, line)


@pytest.mark.parametrize(
    ("status", "blocking"),
    [
        (view("Unknown", engine=engine(1, 2, BUDGET)), "engine: gate Budget: per-Component surge budget 1 exhausted (would become 2)"),
        (view("False", engine=engine(0, 2)), "Ready=False Why: because"),
        (view(None), "phase Updating: no Ready condition reported yet"),
    ],
    ids=["rollout-hold", "ready-condition", "no-condition"],
)
def test_what_a_timeout_names(status: ServiceStatusView, blocking: str) -> None:
    assert progress(status, 1, {}).blocking == blocking


def test_ready_on_the_previous_revision_is_not_ready() -> None:
    moving = ComponentStatus(
        lifecycle=LifecycleStatus(serving_replicas=2, replicas=2, current_revision="rev-1", update_revision="rev-2")
    )
    assert not progress(view(engine=moving), 1, {}).ready
    done = moving.model_copy(update={"lifecycle": moving.lifecycle.model_copy(update={"current_revision": "rev-2"})})  # type: ignore[union-attr]
    assert progress(view(engine=done), 1, {}).ready


def test_a_paused_service_names_the_pause() -> None:
    assert progress(view(pause="true", engine=engine(2, 2)), 2, {}).blocking == (
        "pause=true: changes wait for `omectl resume qwen3-0-6b -n spread-demo`"
    )
