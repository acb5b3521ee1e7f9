"""TEST DOUBLE of the `Migration` workflow, for the Drain's workflow tests.

Not the product's Migration (that one hands the request to the InferenceReplica, which
builds a replacement first): this double signals nobody and only does what a finished
migration leaves behind, deleting the source Instance's pods through the real activities.
It is registered under the real name ("Migration") in the test worker, replacing the
product's workflow there.

The test steers it per Instance through a ConfigMap `migration-double` in the Instance's
namespace, key `<isvc>-<component>-<index>`:
- absent: delete the source pods, answer `Completed` (replacement index = 100 + index);
- `fail:<Reason>:<message>`: answer `Failed` with that reason and message;
- `hold`: wait for the `cancel` signal, then answer `Failed` (`MigrationCancelled`);
- `after:<seconds>`: take that long (workflow time), then as absent (a cancel meanwhile: as `hold`).

Each run records a Normal Event `DoubleMigration` in the namespace whose message is the
request as JSON with the workflow ID, so a test can read what the drain asked for.

A module of its own: the workflow sandbox re-imports the module defining a workflow.
"""

from __future__ import annotations

import json

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.kube_ops import (
        DeletePodsInput,
        ListInstancePodsInput,
        ObjectRef,
        ReadObjectInput,
        RecordEventInput,
    )
    from models.migration import MigrationPhase, MigrationProgress
    from workflows import kube_calls
    from workflows.migration.messages import QUERY_STATUS, SIGNAL_CANCEL, MigrationInput
    from workflows.names import MIGRATION

SCRIPT = "migration-double"
EVENT_REASON = "DoubleMigration"


@workflow.defn(name=MIGRATION)
class MigrationDouble:
    @workflow.init
    def __init__(self, arg: MigrationInput) -> None:
        self.input = arg
        self.cancelled = False
        self.progress = self.answer(MigrationPhase.ACCEPTED)

    @workflow.signal(name=SIGNAL_CANCEL)
    def cancel(self) -> None:
        self.cancelled = True

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> MigrationProgress:
        return self.progress

    def answer(self, phase: MigrationPhase, reason: str | None = None, message: str = "") -> MigrationProgress:
        request = self.input.request
        return MigrationProgress(
            uuid=self.input.uuid,
            component=request.component,
            instance=request.instance,
            from_node=request.from_node,
            phase=phase,
            reason=reason,
            message=message,
            surge_instance=100 + request.instance if phase == MigrationPhase.COMPLETED else None,
        )

    @workflow.run
    async def run(self, arg: MigrationInput) -> MigrationProgress:
        request = arg.request
        name = f"{arg.isvc}-{request.component}-{request.instance}"
        await kube_calls.record_event(
            RecordEventInput(
                involved=ObjectRef(api_version="v1", kind="Namespace", name=arg.namespace, namespace=arg.namespace),
                reason=EVENT_REASON,
                message=json.dumps({"workflow_id": workflow.info().workflow_id, **request.wire()}),
            ),
            summary=f"record the migration of {name}",
        )
        script = await kube_calls.read_object(
            ReadObjectInput(ref=ObjectRef(api_version="v1", kind="ConfigMap", name=SCRIPT, namespace=arg.namespace)),
            summary="read the double's script",
        )
        order = str(((script.object or {}).get("data") or {}).get(name, ""))
        if order == "hold":
            await workflow.wait_condition(lambda: self.cancelled)
            return self.answer(MigrationPhase.FAILED, "MigrationCancelled", "cancelled")
        if order.startswith("after:"):
            try:
                await workflow.wait_condition(lambda: self.cancelled, timeout=float(order.split(":", 1)[1]))
                return self.answer(MigrationPhase.FAILED, "MigrationCancelled", "cancelled")
            except TimeoutError:
                pass
        if order.startswith("fail:"):
            _, reason, message = order.split(":", 2)
            return self.answer(MigrationPhase.FAILED, reason, message)
        pods = await kube_calls.list_instance_pods(
            ListInstancePodsInput(namespace=arg.namespace, isvc=arg.isvc, component=request.component, index=request.instance),
            summary=f"list the pods of {name}",
        )
        await kube_calls.delete_pods(
            DeletePodsInput(namespace=arg.namespace, names=[p.name for p in pods.pods]),
            summary=f"delete the pods of {name}",
        )
        return self.answer(MigrationPhase.COMPLETED, message=f"migrated to instance={100 + request.instance}")
