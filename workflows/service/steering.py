"""The InferenceService workflow's rollout and migration requests: the `promote`, `rollback`,
`repin` and `retry` signals and Updates, which hand each request to the active `Rollout` run
and (as Updates) answer with what its canary decided (`workflows.service.canary_requests`),
and `migrate`, as a signal (a refusal becomes a Warning Event `MigrationRequestRejected`) and
an Update that answers with the `Migration` workflow it started (`workflows.service.migrations`).

A base of `InferenceServiceWorkflow`: the handlers only record or start; the loop acts.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from models.inferenceservice import InferenceService
    from workflows.service import canary_requests, migrations
    from workflows.service.canary_requests import CanaryAsk
    from workflows.service.messages import (
        SIGNAL_MIGRATE,
        SIGNAL_PROMOTE,
        SIGNAL_REPIN,
        SIGNAL_ROLLBACK,
        UPDATE_MIGRATE,
        UPDATE_PROMOTE,
        UPDATE_REPIN,
        UPDATE_RETRY,
        UPDATE_ROLLBACK,
    )
    from workflows.service.placement import ServicePlacement
    from workflows.service.projection import identity


class ServiceSteering(ServicePlacement):
    """Rollout and migration requests; `self.seq` wakes the loop."""

    seq: int

    # --- canary requests (workflows.service.canary_requests) --------------------------

    @workflow.signal(name=SIGNAL_PROMOTE)
    def promote(self, ask: CanaryAsk | None = None) -> None:
        self.ask_canary_by_signal("promote", ask)

    @workflow.signal(name=SIGNAL_ROLLBACK)
    def rollback(self, ask: CanaryAsk | None = None) -> None:
        self.ask_canary_by_signal("rollback", ask)

    @workflow.signal(name=SIGNAL_REPIN)
    def repin(self, ask: CanaryAsk | None = None) -> None:
        self.ask_canary_by_signal("repin", ask)

    def ask_canary_by_signal(self, action: canary_requests.Action, ask: CanaryAsk | None) -> None:
        canary_requests.queue(self.state, canary_requests.request_of(action, ask, self.live_rollout()))
        self.seq += 1

    def live_rollout(self) -> dict[str, Any] | None:
        rollout = InferenceService.model_validate(self.state.manifest).spec.rollout
        return rollout.model_dump(mode="json", by_alias=True, exclude_none=True) if rollout is not None else None

    @workflow.update(name=UPDATE_REPIN)
    async def repin_update(self, ask: CanaryAsk | None = None) -> str:
        return await self.ask_canary("repin", ask)

    @workflow.update(name=UPDATE_PROMOTE)
    async def promote_update(self, ask: CanaryAsk | None = None) -> str:
        return await self.ask_canary("promote", ask)

    @workflow.update(name=UPDATE_ROLLBACK)
    async def rollback_update(self, ask: CanaryAsk | None = None) -> str:
        return await self.ask_canary("rollback", ask)

    @workflow.update(name=UPDATE_RETRY)
    async def retry_update(self, ask: CanaryAsk | None = None) -> str:
        return await self.ask_canary("retry", ask)

    @promote_update.validator
    @repin_update.validator
    @rollback_update.validator
    @retry_update.validator
    def validate_canary_ask(self, ask: CanaryAsk | None = None) -> None:
        if self.state.rollout.run is None:
            raise ApplicationError(canary_requests.REFUSED_NO_RUN, type="ActionRefused", non_retryable=True)

    async def ask_canary(self, action: canary_requests.Action, ask: CanaryAsk | None) -> str:
        """Hand the request to the active run and answer with what its canary decided."""
        request = canary_requests.request_of(action, ask, self.live_rollout())
        canary_requests.queue(self.state, request)
        self.seq += 1
        try:
            await workflow.wait_condition(
                lambda: canary_requests.answer(self.state, request.request_id) is not None,
                timeout=canary_requests.ANSWER_WITHIN_SECONDS,
            )
        except TimeoutError:
            raise ApplicationError(
                f"{action} request {request.request_id} outcome unknown; do not replay, check rollout_status",
                type="OutcomeUnknown",
                non_retryable=True,
            ) from None
        found = canary_requests.answer(self.state, request.request_id)
        assert found is not None
        if not found.accepted:
            raise ApplicationError(found.message, type="ActionRefused", non_retryable=True)
        return found.message

    # --- migrations (workflows.service.migrations) -----------------------------------

    @workflow.signal(name=SIGNAL_MIGRATE)
    async def migrate(self, request: dict[str, Any]) -> None:
        """A refused request becomes a Warning Event `MigrationRequestRejected`."""
        try:
            checked = migrations.checked(self.state, request)
        except ApplicationError as refusal:
            self.reject(SIGNAL_MIGRATE, request, migrations.REJECTED, refusal.message)
            self.seq += 1
            return
        await migrations.start(self.state, *identity(self.state.manifest), checked)

    @workflow.update(name=UPDATE_MIGRATE)
    async def migrate_update(self, request: dict[str, Any]) -> migrations.MigrationStarted:
        """Answers the uuid and the `Migration` workflow's ID; a refusal fails the Update."""
        return await migrations.start(self.state, *identity(self.state.manifest), migrations.checked(self.state, request))

    @migrate_update.validator
    def validate_migrate(self, request: dict[str, Any]) -> None:
        migrations.checked(self.state, request)
