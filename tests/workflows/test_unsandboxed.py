"""`OME_WORKER__SANDBOX=false`: the worker runs the product's workflows without the SDK sandbox
(issue 17's measured lever: no re-import of the workflow modules per run). The same workflows
bring a service up, recreate a killed pod and roll out a new image, as they do sandboxed."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from kubesim.handle import KubeSim
from models.instance import InstancePhase
from tests.workflows import service_harness
from tests.workflows.service_harness import (
    NAME,
    NAMESPACE,
    end_the_service,
    engine_ready,
    eventually,
    isvc_manifest,
    story,
    with_image,
)
from workers.config import Settings
from workers.worker import build_worker

pytestmark = pytest.mark.workflows

POD = f"{NAME}-engine-0-default-0"


def test_the_setting_chooses_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().worker.sandbox is True
    monkeypatch.setenv("OME_WORKER__SANDBOX", "false")
    assert Settings().worker.sandbox is False


async def test_build_worker_runs_unsandboxed_when_asked(workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim) -> None:
    sandboxed = build_worker(workflow_env.client, task_queue, kubesim.api_client())
    unsandboxed = build_worker(workflow_env.client, f"{task_queue}-2", kubesim.api_client(), sandbox=False)
    assert isinstance(sandboxed.config()["workflow_runner"], SandboxedWorkflowRunner)
    assert isinstance(unsandboxed.config()["workflow_runner"], UnsandboxedWorkflowRunner)


async def test_unsandboxed_workflows_bring_up_recreate_and_roll_out(
    workflow_env: WorkflowEnvironment, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_harness, "terminate_leftovers", end_the_service)
    async with story(workflow_env.client, task_queue, kubesim, sandbox=False) as s:
        await s.apply(isvc_manifest())
        await eventually(lambda: engine_ready(s), "two Ready engine Instances")
        first = await s.instance()
        assert first.phase == InstancePhase.READY

        old_uid = s.live_uid(POD)
        s.core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)

        async def recreated() -> bool:
            uid = s.live_uid(POD)
            return uid not in (None, old_uid) and (await s.instance()).phase == InstancePhase.READY

        await eventually(recreated, "the killed pod recreated and its Instance Ready again")

        await s.apply(with_image(isvc_manifest(), "registry.example/engine:v2"))

        def rolled_out() -> bool:
            pods = [p for p in s.pods() if p.metadata.deletion_timestamp is None]
            return len(pods) == 2 and all(p.spec.containers[0].image == "registry.example/engine:v2" for p in pods)

        await eventually(rolled_out, "both pods on the new image")
        await eventually(lambda: engine_ready(s, generation=2), "two Ready engine Instances after the rollout")
