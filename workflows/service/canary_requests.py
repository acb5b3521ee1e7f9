"""An operator's rollout requests on the InferenceService: promote, rollback, retry (spec
reference §3; OME's `ome.io/rollout-promote`, `-rollback` and `-resume` annotations) and
repin (§4, `ome.io/rollout-repin`).

Each is a signal (the design's way: a refusal becomes a Warning Event, recorded by the run,
and `last_rejected_request` in `status`) and an Update of the same name that answers with
what the request does, or fails with the exact refusal text. Either way the request goes to
the active `Rollout` run (`canary_request`), whose canary decides: the InferenceService
holds no canary state of its own, so the answer is always the run's. A request while no run
is active is refused here: `action refused: no applicable active rollout or lifecycle work
was observed`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from temporalio import workflow

from models.base import MessageModel
from workflows.parent import deliver
from workflows.rollout.messages import SIGNAL_CANARY, CanaryAnswer, CanaryRequest
from workflows.service.messages import RejectedRequest, ServiceState

REFUSED_NO_RUN = "action refused: no applicable active rollout or lifecycle work was observed"
ANSWER_WITHIN_SECONDS = 60.0
"""How long an Update waits for the run's answer before saying the outcome is unknown."""


class CanaryAsk(MessageModel):
    """The input of `promote`, `rollback` and `retry` (all optional)."""

    revision: str | None = None
    """The canary revision hash the request is meant for (`ome.io/rollout-promote=<hash>`);
    a request naming an older canary is refused. For `retry`: `engine=<hash>` or `<hash>`."""
    override_analysis: bool = False
    """`promote` only: pass an Analysis gate, bypassing warm-up, sampling and bake."""
    component: str | None = None
    """Selects the canary group when the plan has several."""
    digest: str | None = None
    """`repin` only: the live plan digest the operator saw (`rp1:<12 hex>`, from `explain` or
    `status.conditions[RolloutPlanDrift]`), or `now` to skip the check."""
    request_id: str = Field(default="", max_length=128)


Action = Literal["promote", "rollback", "retry", "repin", "discard"]
DISCARDED = ("promote", "rollback")
"""What `pause` with `discard_pending_actions` drops (`discard` asks the run to drop its own)."""


def request_of(action: Action, ask: CanaryAsk | None, rollout: dict[str, Any] | None = None) -> CanaryRequest:
    """The run's request; `retry`'s `engine=<hash>` selects the group by its component;
    `repin` carries the live `spec.rollout`."""
    ask = ask or CanaryAsk()
    component, revision = ask.component, ask.revision
    if action == "retry" and revision is not None and "=" in revision:
        component, revision = revision.split("=", 1)
    if action == "repin":
        revision = ask.digest or ""
    return CanaryRequest(
        action=action,
        revision=revision or None,
        override_analysis=ask.override_analysis,
        component=component,
        request_id=ask.request_id or str(workflow.uuid4()),
        rollout=rollout if action == "repin" else None,
    )


def queue(state: ServiceState, request: CanaryRequest) -> None:
    state.rollout.canary_requests.append(request)


def refuse_without_run(state: ServiceState) -> list[RejectedRequest]:
    """Requests queued while no run is active: refused (the caller records their Events)."""
    if state.rollout.run is not None or not state.rollout.canary_requests:
        return []
    # A pause's discard has nothing to drop without a run.
    state.rollout.canary_requests = [r for r in state.rollout.canary_requests if r.action != "discard"]
    refused = [
        RejectedRequest(
            signal=request.action,
            request=request.model_dump(mode="json", exclude_defaults=True),
            reason="RolloutRequestRejected",
            message=REFUSED_NO_RUN,
            at=workflow.now(),
        )
        for request in state.rollout.canary_requests
    ]
    state.rollout.canary_requests = []
    return refused


async def forward(state: ServiceState, run_id: str) -> bool:
    """Deliver the queued requests to the active run; False: it has closed."""
    tracking = state.rollout
    while tracking.canary_requests:
        if not await deliver(run_id, SIGNAL_CANARY, tracking.canary_requests[0]):
            return False
        tracking.canary_requests.pop(0)
    return True


def answer(state: ServiceState, request_id: str) -> CanaryAnswer | None:
    report = state.rollout.report
    if report is None:
        return None
    return next((a for a in report.answers if a.request_id == request_id), None)


def note_refusals(state: ServiceState) -> None:
    """The latest refusal the run answered becomes `last_rejected_request` (its Warning Event
    was recorded by the run)."""
    report = state.rollout.report
    if report is None:
        return
    for found in report.answers:
        if found.accepted or found.request_id in state.rollout.answers_seen:
            continue
        state.rollout.answers_seen = [*state.rollout.answers_seen, found.request_id][-40:]
        state.last_rejected = RejectedRequest(
            signal=found.action,
            request={"request_id": found.request_id},
            reason="RolloutRequestRejected",
            message=found.message,
            at=workflow.now(),
        )
