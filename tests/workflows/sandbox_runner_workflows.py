"""Workflows for `test_sandbox_runner`: one of each command whose payloads take a context of
their own (an activity, a local activity, a child, a signal to another workflow). In their own
module because the sandbox re-imports a workflow's module (see `instance_parent`)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

ECHO = "sandbox-runner-echo"


@activity.defn(name=ECHO)
async def echo(text: str) -> str:
    return text


@workflow.defn(name="SandboxRunnerChild")
class SandboxRunnerChild:
    def __init__(self) -> None:
        self.heard: list[str] = []

    @workflow.signal
    def hear(self, text: str) -> None:
        self.heard.append(text)

    @workflow.run
    async def run(self, text: str) -> str:
        await workflow.wait_condition(lambda: bool(self.heard))
        return f"{text}+{self.heard[0]}"


@workflow.defn(name="SandboxRunnerParent")
class SandboxRunnerParent:
    @workflow.run
    async def run(self, text: str) -> list[str]:
        timeout = timedelta(seconds=10)
        remote = await workflow.execute_activity(
            ECHO, f"{text}-remote", start_to_close_timeout=timeout, result_type=str
        )
        local = await workflow.execute_local_activity(
            ECHO, f"{text}-local", start_to_close_timeout=timeout, result_type=str
        )
        child = await workflow.start_child_workflow(
            SandboxRunnerChild.run, f"{text}-child", id=f"{workflow.info().workflow_id}-child"
        )
        await child.signal(SandboxRunnerChild.hear, f"{text}-signal")
        return [remote, local, await child]
