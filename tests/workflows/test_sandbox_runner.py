"""`workers.sandbox_runner`: the sandbox asked once per command for its serialization context,
and every payload still encoded and decoded with the context the SDK's own sandbox gives it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    ActivitySerializationContext,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkflowInstance
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from tests.workflows.sandbox_runner_workflows import SandboxRunnerChild, SandboxRunnerParent, echo
from workers.client import DATA_CONVERTER
from workers.sandbox_runner import ContextCachingSandboxRunner

pytestmark = pytest.mark.workflows


def describe(context: SerializationContext | None) -> str:
    if isinstance(context, ActivitySerializationContext):
        return f"activity {context.activity_type} of {context.workflow_id} local={context.is_local}"
    if isinstance(context, WorkflowSerializationContext):
        return f"workflow {context.workflow_id}"
    return "none"


class RecordingCodec(PayloadCodec, WithSerializationContext):
    """Passes payloads through, noting for each the context it was given."""

    def __init__(self, seen: list[tuple[str, str, str]], context: SerializationContext | None = None) -> None:
        self.seen = seen
        self.context = context

    def with_context(self, context: SerializationContext) -> RecordingCodec:
        return RecordingCodec(self.seen, context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.seen.extend(("encode", p.data.decode(), describe(self.context)) for p in payloads)
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.seen.extend(("decode", p.data.decode(), describe(self.context)) for p in payloads)
        return list(payloads)


def counting(runner: type[SandboxedWorkflowRunner], asked: list[object]) -> type[SandboxedWorkflowRunner]:
    """`runner`, with each question that reaches a sandboxed instance noted in `asked`."""

    class Counting(runner):  # type: ignore[misc,valid-type]
        def create_instance(self, det: Any) -> WorkflowInstance:
            instance = super().create_instance(det)
            sandboxed = getattr(instance, "sandboxed", instance)
            original = sandboxed.get_serialization_context

            def counted(command_info: Any) -> Any:
                asked.append(command_info)
                return original(command_info)

            sandboxed.get_serialization_context = counted
            return instance

    return Counting


async def run_parent(
    env: WorkflowEnvironment, task_queue: str, runner: SandboxedWorkflowRunner
) -> list[tuple[str, str, str]]:
    seen: list[tuple[str, str, str]] = []
    converter = dataclasses.replace(DATA_CONVERTER, payload_codec=RecordingCodec(seen))
    client = Client(env.client.service_client, namespace=env.client.namespace, data_converter=converter)
    async with Worker(
        client, task_queue=task_queue, workflows=[SandboxRunnerParent, SandboxRunnerChild], activities=[echo],
        workflow_runner=runner, max_cached_workflows=10,
    ):  # fmt: skip
        result = await client.execute_workflow(
            SandboxRunnerParent.run, "x", id=f"parent-{task_queue}", task_queue=task_queue
        )
    assert result == ["x-remote", "x-local", "x-child+x-signal"]
    # The worker's own side only (the client's encodes and decodes name no command).
    return sorted(entry for entry in seen if entry[2] != "none")


async def test_each_payload_keeps_the_context_the_sdk_sandbox_gives_it(
    workflow_env: WorkflowEnvironment, task_queue: str
) -> None:
    restrictions = SandboxRestrictions.default.with_passthrough_modules("pydantic")
    asked_cached: list[object] = []
    asked_plain: list[object] = []
    runner = counting(ContextCachingSandboxRunner, asked_cached)(restrictions=restrictions)
    cached = await run_parent(workflow_env, task_queue, runner)
    plain_runner = counting(SandboxedWorkflowRunner, asked_plain)(restrictions=restrictions)
    plain = await run_parent(workflow_env, f"{task_queue}-plain", plain_runner)
    normalised = [
        (kind, data, context.replace(f"{task_queue}-plain", task_queue)) for kind, data, context in plain
    ]
    assert cached == sorted(normalised)
    contexts = {context for _kind, _data, context in cached}
    assert f"activity sandbox-runner-echo of parent-{task_queue} local=False" in contexts
    assert f"activity sandbox-runner-echo of parent-{task_queue} local=True" in contexts
    assert f"workflow parent-{task_queue}-child" in contexts
    # The SDK's sandbox is asked at every visit of every payload (three passes each way); the
    # cache asks once per command (and once for the payloads of none) in each instance.
    assert 3 * len(asked_cached) <= len(asked_plain), (len(asked_cached), len(asked_plain))
