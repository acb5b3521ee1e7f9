"""A stand-in for the InferenceService workflow, registered under its type name, so the
controller's tests (tests/workers/test_controller.py) run against a real Temporal server without
the product workflow: it implements the contract the controller uses (the `apply` Update with its
origin and refusal, the `applied` query, the steering signals and Updates) and records every
message it receives (`calls` query). It has no tests of its own."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from planning.service.relay import manifest_digest

REFUSE_LABEL = "refuse"
"""A manifest carrying this label is refused by admission."""
REFUSED_REVISION = "stale"
"""`promote` / `retry` of this revision is refused."""
REFUSED_COMPONENT = "bogus"
"""A migration request for this component is refused (invalid input)."""
CONFLICTING_COMPONENT = "router"
"""A migration request for this component is refused for the service's state (a conflict)."""
HANGING_REVISION = "hang"
"""`promote` of this revision answers only after the `unhang` signal (a stuck canary)."""
ADMISSION_MESSAGE = (
    "InferenceService refused by admission:\n"
    'metadata.labels["refuse"] asks to be refused (FieldValueInvalid)'
)


@workflow.defn(name="InferenceService")
class FakeInferenceService:
    @workflow.init
    def __init__(self, start: dict[str, Any]) -> None:
        self.generation = 0
        self.object_generation = 0
        self.digest = ""
        self.deleting = False
        self.hanging = True
        self.pause_mode: str | None = None
        self.calls: list[dict[str, Any]] = []

    @workflow.run
    async def run(self, start: dict[str, Any]) -> list[dict[str, Any]]:
        await workflow.wait_condition(lambda: self.deleting and workflow.all_handlers_finished())
        return self.calls

    def note(self, name: str, value: Any = None) -> None:
        self.calls.append({"name": name, "input": value})

    # --- the spec -----------------------------------------------------------------------

    @workflow.update(name="apply")
    def apply(self, manifest: dict[str, Any], origin: dict[str, Any] | None = None) -> dict[str, Any]:
        object_generation = int((origin or {}).get("object_generation") or 0)
        digest = manifest_digest(manifest)
        self.note("apply", {"object_generation": object_generation, "digest": digest, "origin": origin})
        if object_generation and object_generation < self.object_generation:
            return {"accepted": True, "generation": self.generation, "changed": False, "superseded": True}
        changed = digest != self.digest
        if changed:
            self.generation += 1
            self.digest = digest
        self.object_generation = max(self.object_generation, object_generation)
        return {"accepted": True, "generation": self.generation, "changed": changed}

    @apply.validator
    def validate_apply(self, manifest: dict[str, Any], origin: dict[str, Any] | None = None) -> None:
        if REFUSE_LABEL in ((manifest.get("metadata") or {}).get("labels") or {}):
            raise ApplicationError(ADMISSION_MESSAGE, ["FieldValueInvalid"], type="AdmissionDenied")

    @workflow.query(name="applied")
    def applied(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "object_generation": self.object_generation,
            "digest": self.digest,
            "deleting": self.deleting,
        }

    @workflow.query(name="calls")
    def calls_query(self) -> list[dict[str, Any]]:
        return self.calls

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        """A `ServiceStatusView` with the pause the signals set (what omectl reads first)."""
        name = workflow.info().workflow_id.rsplit("/", 1)[-1]
        namespace = workflow.info().workflow_id.split("/")[1]
        return {
            "name": name,
            "namespace": namespace,
            "generation": self.generation,
            "phase": "Ready",
            "paused": self.pause_mode is not None,
            "pause": self.pause_mode,
            "deleting": self.deleting,
            "status": {},
        }

    # --- signals ------------------------------------------------------------------------

    @workflow.signal(name="pause")
    def pause(self, mode: Any = None) -> None:
        self.note("pause", mode)
        value = mode.get("mode") if isinstance(mode, dict) else mode
        self.pause_mode = "freeze" if value == "freeze" else "true"

    @workflow.signal(name="resume")
    def resume(self, retry: Any = None) -> None:
        self.note("resume", retry)
        self.pause_mode = None

    @workflow.signal(name="runtime_changed")
    def runtime_changed(self) -> None:
        self.note("runtime_changed")

    @workflow.signal(name="release_held")
    def release_held(self, request: dict[str, Any]) -> None:
        self.note("release_held", request)

    @workflow.signal(name="reset_instances")
    def reset_instances(self, request: dict[str, Any]) -> None:
        self.note("reset_instances", request)

    @workflow.signal(name="delete")
    def delete(self, request: dict[str, Any] | None = None) -> None:
        self.note("delete", request)
        self.deleting = True

    @workflow.signal(name="unhang")
    def unhang(self) -> None:
        self.hanging = False

    # --- Updates ------------------------------------------------------------------------

    def canary(self, name: str, ask: dict[str, Any] | None) -> str:
        self.note(name, ask)
        if (ask or {}).get("revision") == REFUSED_REVISION:
            raise ApplicationError(
                f"action refused: canary revision {REFUSED_REVISION} is not the active canary", type="ActionRefused"
            )
        return f"{name} accepted"

    @workflow.update(name="promote")
    async def promote(self, ask: dict[str, Any] | None = None) -> str:
        if (ask or {}).get("revision") == HANGING_REVISION:
            self.note("promote", ask)
            await workflow.wait_condition(lambda: not self.hanging)
            return "promote accepted"
        return self.canary("promote", ask)

    @workflow.update(name="rollback")
    def rollback(self, ask: dict[str, Any] | None = None) -> str:
        return self.canary("rollback", ask)

    @workflow.update(name="retry")
    def retry(self, ask: dict[str, Any] | None = None) -> str:
        return self.canary("retry", ask)

    @workflow.update(name="repin")
    def repin(self, ask: dict[str, Any] | None = None) -> str:
        return self.canary("repin", ask)

    @workflow.update(name="migrate")
    def migrate(self, request: dict[str, Any]) -> dict[str, Any]:
        self.note("migrate", request)
        if request.get("component") == REFUSED_COMPONENT:
            raise ApplicationError(
                f"migration request: component {REFUSED_COMPONENT!r} is not a component of this InferenceService",
                type="MigrationRequestRejected",
            )
        if request.get("component") == CONFLICTING_COMPONENT:
            raise ApplicationError(
                f"migration request: component {CONFLICTING_COMPONENT!r} is RawDeployment; only OMENative "
                "components have Instances to migrate (components: engine=OMENative, router=RawDeployment)",
                type="MigrationPreconditionConflict",
            )
        return {"uuid": request.get("uuid"), "workflow_id": "migration/x"}
