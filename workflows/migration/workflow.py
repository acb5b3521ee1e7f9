"""The `Migration` workflow: one request to move an Instance off a node, replacement first.

`migration/{ns}/{isvc}-{component}-{index}/{uuid}`, started by the InferenceService's
`migrate` Update or signal, or by a `Drain`. Its history is the request's story:

1. read the worker's audit caps (`settings.migration`) and write the request's row,
   `Accepted`, into the audit ConfigMap `<isvc>-ome-migration-audit`;
2. hand the request to the component's InferenceReplica (`migrate`), which carries it out
   (`planning.replica.migrations`) and reports each phase back (`migration_changed`):
   `SurgePending` -> `SurgeReady` -> `Draining` -> `Completed`, or `Failed`;
3. forward a `cancel` to the InferenceReplica; while the request waits for caps, read them
   again every minute (an operator may have just configured them);
4. write the ended row into the audit ConfigMap and return the last `MigrationProgress`.

The InferenceReplica decides every transition, so two requests of one component never race;
this workflow waits on its reports and never polls (a slow re-send covers a lost one).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from models.migration import (
        MIGRATION_SETTINGS,
        RECORD_MIGRATION_AUDIT,
        AuditRowInput,
        AuditRowResult,
        MigrationAudit,
        MigrationPhase,
        MigrationProgress,
        MigrationSettingsResult,
    )
    from planning.migration.audit import audit_row
    from planning.replica.migrations import POLICY_UNCONFIGURED_WAIT
    from workflows import search_attributes
    from workflows.migration.messages import (
        QUERY_STATUS,
        SIGNAL_CANCEL,
        SIGNAL_MIGRATION_CHANGED,
        MigrationInput,
    )
    from workflows.names import MIGRATION, irep_workflow_id
    from workflows.parent import deliver
    from workflows.replica.messages import (
        SIGNAL_CANCEL_MIGRATION,
        SIGNAL_MIGRATE,
        MigrationCancel,
        MigrationOrder,
    )

RESEND_EVERY = timedelta(minutes=10)
"""A slow re-send of the order: the InferenceReplica answers a known one with its phase."""
CAPS_RECHECK = timedelta(minutes=1)
"""While the request waits for caps: how often the worker's configuration is read again."""
ACTIVITY_TIMEOUT = timedelta(seconds=30)
ACTIVITY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


@workflow.defn(name=MIGRATION)
class MigrationWorkflow:
    @workflow.init
    def __init__(self, arg: MigrationInput) -> None:
        self.input = arg
        request = arg.request
        self.progress = MigrationProgress(
            uuid=arg.uuid,
            component=request.component,
            instance=request.instance,
            from_node=request.from_node,
            phase=MigrationPhase.ACCEPTED,
            message="handed to the InferenceReplica",
        )
        self.seq = 0
        self.cancel_by: str | None = None
        self.cancel_sent = False

    @workflow.signal(name=SIGNAL_MIGRATION_CHANGED)
    def migration_changed(self, progress: MigrationProgress) -> None:
        if progress.uuid == self.input.uuid:
            self.progress = progress
            self.seq += 1

    @workflow.signal(name=SIGNAL_CANCEL)
    def cancel(self, by: str | None = None) -> None:
        self.cancel_by = by or "operator"
        self.seq += 1

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> MigrationProgress:
        return self.progress

    @workflow.run
    async def run(self, arg: MigrationInput) -> MigrationProgress:
        request = arg.request
        workflow.upsert_search_attributes(
            [
                search_attributes.INFERENCE_SERVICE.value_set(arg.isvc),
                search_attributes.COMPONENT.value_set(request.component),
                search_attributes.PHASE.value_set(MigrationPhase.ACCEPTED.value),
            ]
        )
        accepted_at = workflow.info().start_time
        self.progress = self.progress.model_copy(update={"accepted_at": accepted_at})
        audit = await self.read_caps()
        await self.write_audit()
        irep = irep_workflow_id(arg.namespace, arg.isvc, request.component, arg.home)
        order = MigrationOrder(
            request=request, accepted_at=accepted_at, workflow_id=workflow.info().workflow_id, audit=audit
        )
        if not await deliver(irep, SIGNAL_MIGRATE, order):
            return await self.end_rejected(f"component={request.component} has no InferenceReplica ({irep})")
        while not self.progress.phase.terminal:
            seen = self.seq
            if self.cancel_by is not None and not self.cancel_sent:
                self.cancel_sent = True
                await deliver(irep, SIGNAL_CANCEL_MIGRATION, MigrationCancel(uuid=arg.uuid, by=self.cancel_by))
            waiting_caps = self.progress.message == POLICY_UNCONFIGURED_WAIT
            try:
                await workflow.wait_condition(
                    lambda seen=seen: self.seq != seen,
                    timeout=CAPS_RECHECK if waiting_caps else RESEND_EVERY,
                    timeout_summary=f"{self.progress.phase.value}: {self.progress.message}"[:200],
                )
            except TimeoutError:
                if waiting_caps:
                    order = order.model_copy(update={"audit": await self.read_caps()})
                if not await deliver(irep, SIGNAL_MIGRATE, order):
                    # Its InferenceReplica ended (the InferenceService was deleted) without a word.
                    return await self.end_rejected(f"the InferenceReplica {irep} is gone")
                continue
            workflow.upsert_search_attributes([search_attributes.PHASE.value_set(self.progress.phase.value)])
            self.show()
        await self.write_audit()
        return self.progress

    def show(self) -> None:
        """The UI's current details: where the migration stands, in one line."""
        progress = self.progress
        workflow.set_current_details(f"{progress.phase.value}: {progress.message}"[:1000])

    async def read_caps(self) -> MigrationAudit | None:
        settings = await workflow.execute_activity(
            MIGRATION_SETTINGS,
            result_type=MigrationSettingsResult,
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
            summary="read the worker's migration caps (lifecycle.audit)",
        )
        return settings.audit

    async def write_audit(self) -> None:
        arg, progress = self.input, self.progress
        await workflow.execute_activity(
            RECORD_MIGRATION_AUDIT,
            AuditRowInput(
                namespace=arg.namespace,
                isvc=arg.isvc,
                isvc_uid=arg.isvc_uid,
                row=audit_row(progress, arg.request),
            ),
            result_type=AuditRowResult,
            start_to_close_timeout=ACTIVITY_TIMEOUT,
            retry_policy=ACTIVITY_RETRY,
            summary=f"audit: migration {arg.uuid} {progress.phase.value} in {arg.isvc}-ome-migration-audit",
        )

    async def end_rejected(self, message: str) -> MigrationProgress:
        self.progress = self.progress.model_copy(
            update={
                "phase": MigrationPhase.FAILED,
                "reason": "MigrationRequestRejected",
                "message": message,
                "ended_at": workflow.now(),
            }
        )
        workflow.upsert_search_attributes([search_attributes.PHASE.value_set(MigrationPhase.FAILED.value)])
        await self.write_audit()
        return self.progress
