"""Stand-ins for the TrafficMap, Drain and InferenceReplica workflows, registered under their type names, so
omectl's plumbing tests (test_commands.py) run against a real Temporal server in milliseconds:
they answer the same query and Update names with the same shapes and refusal texts. The real
workflows are exercised by test_commands_real.py and the README walkthrough."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from planning.trafficmap.texts import DRAIN_ID_EXISTS


@workflow.defn(name="TrafficMap")
class StandInTrafficMap:
    """Answers `status` with the view it was started with, and keeps drains by override ID."""

    @workflow.init
    def __init__(self, view: dict[str, Any]) -> None:
        self.view = view
        self.drains: dict[str, str] = {}
        self.done = False

    @workflow.run
    async def run(self, view: dict[str, Any]) -> None:
        await workflow.wait_condition(lambda: self.done and workflow.all_handlers_finished())

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return self.view

    @workflow.update(name="drain_cluster")
    def drain_cluster(self, request: dict[str, Any]) -> dict[str, Any]:
        before = len(self.drains)
        self.drains[request["id"]] = request["cluster"]
        row = {"override_id": request["id"], "cluster": request["cluster"], "overrides": f"{before} -> {before + 1}"}
        return {"rows": [row]}

    @drain_cluster.validator
    def validate_drain(self, request: dict[str, Any]) -> None:
        if request["id"] in self.drains:
            raise ApplicationError(DRAIN_ID_EXISTS, type="TrafficDrainRefused")

    @workflow.signal(name="delete")
    def delete(self) -> None:
        self.done = True


@workflow.defn(name="Drain")
class StandInDrain:
    """Holds until `release`, recording its input for the test to read."""

    @workflow.init
    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.released = False

    @workflow.run
    async def run(self, request: dict[str, Any]) -> str:
        await workflow.wait_condition(lambda: self.released)
        return "Released"

    @workflow.query(name="input")
    def input(self) -> dict[str, Any]:
        return self.request

    @workflow.signal(name="release")
    def release(self) -> None:
        self.released = True


@workflow.defn(name="InferenceReplica")
class StandInInferenceReplica:
    """Answers `status` with the InferenceReplica status it was started with."""

    @workflow.init
    def __init__(self, status: dict[str, Any]) -> None:
        self.view = status
        self.done = False

    @workflow.run
    async def run(self, status: dict[str, Any]) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return self.view

    @workflow.signal(name="delete")
    def delete(self) -> None:
        self.done = True
