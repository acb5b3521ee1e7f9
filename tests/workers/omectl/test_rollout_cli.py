"""`omectl rollout status|explain|history` through Typer's CliRunner against the real workflows:
the InferenceService, its InferenceReplicas and Instances and a canary `Rollout` run on kubesim
(the harness of tests/workflows/test_service_rollout.py). The product's service workflows run
on the real-time dev server with kubesim, as the service tests do; it also has the visibility
store `history` lists runs with (the time-skipping server has none: `rollout_reads` then walks
the generations, which the history test checks too).

One story: mistral-pd (two engines, two decoders) changes image under a two-step canary whose
first step waits at a manual gate; `status --watch --until-done` runs while an operator
promotes, and exits 0 once every Instance serves the new revision.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from typer.testing import CliRunner, Result

from kubesim.handle import KubeSim
from tests.workflows.rollout_examples import NAME, NAMESPACE, pd_manifest, pd_runtime
from tests.workflows.service_harness import IMAGE_1, IMAGE_2, Story, eventually, story
from tests.workflows.test_service_rollout import settled
from workers.omectl import rollout_reads, session
from workers.omectl.rollout import app
from workers.omectl.rollout_watch import FRAME_MARK
from workflows.service.messages import RolloutStatusView
from workflows.service.workflow import InferenceServiceWorkflow

pytestmark = pytest.mark.workflows

FAST = {"drain_seconds": 0.2, "stuck_pod_grace_seconds": 1, "update_retry": None}
MANUAL_CANARY = {
    "groups": [
        {
            "components": ["engine", "decoder"],
            "canary": {"steps": [{"capacity": "50%", "traffic": 50, "pause": {}}, {"capacity": "100%", "traffic": 100}]},
        }
    ]
}


@pytest.fixture
def omectl(dev_client: Client, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Runs `omectl rollout ARGS` in a thread (a command runs its own event loop) against the
    dev server; `session.finish` raises SystemExit instead of ending the test process."""
    monkeypatch.setenv("OME_TEMPORAL__ADDRESS", dev_client.service_client.config.target_host)
    monkeypatch.setenv("OME_TEMPORAL__NAMESPACE", dev_client.namespace)
    monkeypatch.setattr(session, "finish", lambda code: sys.exit(code))
    runner = CliRunner()

    async def invoke(*args: str) -> Result:
        return await asyncio.to_thread(runner.invoke, app, list(args), catch_exceptions=False)

    return invoke


async def rollout_status(s: Story) -> RolloutStatusView:
    return await s.handle().query(InferenceServiceWorkflow.rollout_status)


async def at_manual_gate(s: Story) -> bool:
    found = await rollout_status(s)
    return bool(found.rows) and all(row.phase == "Paused" and row.gate == "Manual" for row in found.rows)


@asynccontextmanager
async def canary_at_its_gate(client: Client, task_queue: str, sim: KubeSim) -> AsyncIterator[Story]:
    """mistral-pd serving IMAGE_1, then changed to IMAGE_2: its canary waits at step 1's manual gate."""
    namespace = f"{NAMESPACE}-{uuid4().hex[:6]}"
    async with story(client, task_queue, sim, cluster=FAST, name=NAME, namespace=namespace, runtime=pd_runtime()) as s:
        await s.apply(pd_manifest(namespace, MANUAL_CANARY, replicas=(2, 2)))
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_1), "mistral-pd serving", within=90)
        await s.apply(pd_manifest(namespace, MANUAL_CANARY, image=IMAGE_2, replicas=(2, 2)))
        await eventually(lambda: at_manual_gate(s), "the canary waiting at its manual gate", within=90)
        yield s


async def test_status_watch_explain_and_history_of_a_promoted_canary(
    dev_client: Client, task_queue: str, kubesim: KubeSim, omectl: Any
) -> None:
    async with canary_at_its_gate(dev_client, task_queue, kubesim) as s:
        namespace = s.namespace
        missing = await omectl("status", "no-such-service", "-n", namespace)
        assert missing.exit_code == 1 and f"no workflow isvc/{namespace}/no-such-service" in missing.output

        shown = await omectl("status", NAME, "-n", namespace)
        assert shown.exit_code == 0, shown.output
        assert "run 2 (active)" in shown.output and "rollout Paused" in shown.output
        assert "Canary group 0" in shown.output and "step 1/2" in shown.output
        assert "gate Manual" in shown.output and "(released by promote)" in shown.output
        assert shown.output.count("Instances  1/2 on update revision") == 2  # engine and decoder: 50% moved

        as_json = await omectl("status", NAME, "-n", namespace, "-o", "json")
        answers = json.loads(as_json.output)
        assert answers["rollout"]["rows"][0]["step"] == "1/2" and set(answers["replicas"]) >= {"engine", "decoder"}

        explained = await omectl("explain", NAME, "engine", "-n", namespace)
        assert explained.exit_code == 0, explained.output
        views = {line.split(None, 1)[0]: line.split(None, 1)[1].strip() for line in explained.output.splitlines() if line.strip()}
        assert views["READY"] == "True/Pinned" and views["HOLD"] == "ObservedPaused"
        assert views["GATE"] == "Manual" and views["RELEASE"] == "promote"
        assert views["REVISIONS"].startswith("stable=") and ",rejected=" in views["REVISIONS"]
        unknown = await omectl("explain", NAME, "planner", "-n", namespace)
        assert unknown.exit_code == 1 and "has no component 'planner'" in unknown.output

        watching = asyncio.create_task(omectl("status", NAME, "-n", namespace, "--watch", "--until-done"))
        await asyncio.sleep(2.5)  # the watch draws the canary at its gate first
        await s.handle().execute_update("promote", None, result_type=str)
        watched = await asyncio.wait_for(watching, timeout=120)
        assert watched.exit_code == 0, watched.output
        frames = watched.output.split(FRAME_MARK)[1:]
        assert len(frames) >= 2 and "step 1/2" in frames[0] and "gate Manual" in frames[0]
        assert frames[-1].count("Instances  2/2 on update revision") == 2 and "gate Manual" not in frames[-1]
        await eventually(lambda: settled(s, {"engine": 2, "decoder": 2}, IMAGE_2), "the new image serving", within=60)

        told = await omectl("history", NAME, "-n", namespace, "-o", "json")
        assert told.exit_code == 0, told.output
        (run,) = json.loads(told.output)
        assert (run["run"], run["last"], run["workflowId"]) == (2, "Completed", f"rollout/{namespace}/{NAME}/2")
        rows = [(row["kind"], row["what"], row["who"]) for row in run["rows"]]
        assert rows[0][0] == "Started" and rows[-1] == ("Outcome", "run 2 ended: Completed", "")
        assert any(kind == "CanaryStepReady" and what.endswith("gate Manual") for kind, what, _ in rows)
        promoted = next(row for row in rows if row[0] == "Operator")
        assert promoted[1].startswith("promote (Update): promote accepted") and promoted[2] == dev_client.identity
        assert [kind for kind, _, _ in rows].index("Operator") < [kind for kind, _, _ in rows].index("CanaryPromoting")

        table = await omectl("history", NAME, "-n", namespace)
        assert table.exit_code == 0 and "LAST Completed" in table.output and "CanaryCompleted" in table.output

        # Without a visibility store the runs are found by walking the generations.
        by_generation = await rollout_reads.histories_by_generation(dev_client, namespace, NAME, 5)
        assert [found.workflow_id for found in by_generation] == [run["workflowId"]]


async def test_watch_until_done_exits_1_when_the_canary_is_rolled_back(
    dev_client: Client, task_queue: str, kubesim: KubeSim, omectl: Any
) -> None:
    async with canary_at_its_gate(dev_client, task_queue, kubesim) as s:
        watching = asyncio.create_task(omectl("status", NAME, "-n", s.namespace, "--watch", "--until-done"))
        await asyncio.sleep(2.5)
        await s.handle().execute_update("rollback", None, result_type=str)
        watched = await asyncio.wait_for(watching, timeout=120)
        assert watched.exit_code == 1, watched.output
        assert f"rollout of {s.namespace}/{NAME} failed or rolled back" in watched.output
        assert "RollingBack" in watched.output or "RolledBack" in watched.output

        with pytest.raises(WorkflowUpdateFailedError):  # nothing left to promote: refused, with the reference's text
            await s.handle().execute_update("promote", None, result_type=str)
        told = await omectl("history", NAME, "-n", s.namespace, "-o", "json")
        (run,) = json.loads(told.output)
        assert run["last"] == "RolledBack"
        operators = [(row["what"], row["who"]) for row in run["rows"] if row["kind"] == "Operator"]
        assert operators[0][0].startswith("rollback (Update): ") and operators[0][1] == dev_client.identity
        assert operators[1][0].startswith("promote (Update): refused: action refused: ")
