"""Deliberately changed copies of the product's workflows, for the replay test's negative case.

Each class registers under the real workflow type name and behaves exactly like the product's
workflow except that its run starts with one extra durable timer: the kind of edit (a new step
added in front of the old ones) that breaks every running workflow of that type unless it is
guarded by `workflow.patched()`. Replaying a recorded history against one of these must fail
with `NondeterminismError`; if it does not, the replay test would not catch a real change
either.

A module of its own: the workflow sandbox re-imports the module that defines a workflow, and
the test module imports the worker (and so the kubernetes client), which the sandbox refuses.
"""

from __future__ import annotations

import inspect
import typing
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.instance.workflow import InstanceWorkflow
    from workflows.names import INFERENCE_REPLICA, INFERENCE_SERVICE, INSTANCE, ROLLOUT
    from workflows.replica.workflow import InferenceReplicaWorkflow
    from workflows.rollout.workflow import RolloutWorkflow
    from workflows.service.workflow import InferenceServiceWorkflow

EXTRA_TIMER = timedelta(seconds=1)


def changed(name: str, base: type[Any]) -> type[Any]:
    """`base` registered as `name`, its run preceded by one extra timer.

    Built from the real class rather than written out per workflow so that it follows the
    workflow's current run signature (the SDK checks it against `@workflow.init`) while other
    engineers still reshape the inputs.
    """

    async def run(self, arg):  # type: ignore[no-untyped-def]  # typed below, from `base.run`
        await workflow.sleep(EXTRA_TIMER)  # the deliberate, unpatched change
        return await base.run(self, arg)

    # The real run's signature, which the SDK compares with `@workflow.init`'s, and its resolved
    # hints, by which the data converter decodes the input.
    run.__signature__ = inspect.signature(base.run)  # type: ignore[attr-defined]
    run.__annotations__ = typing.get_type_hints(base.run)
    run.__qualname__ = f"Changed{base.__name__}.run"
    subclass = type(f"Changed{base.__name__}", (base,), {"run": workflow.run(run), "__module__": __name__})
    return workflow.defn(name=name)(subclass)


# Module attributes under the classes' own names: the sandbox re-imports each workflow by name.
ChangedInstanceWorkflow = changed(INSTANCE, InstanceWorkflow)
ChangedInferenceReplicaWorkflow = changed(INFERENCE_REPLICA, InferenceReplicaWorkflow)
ChangedInferenceServiceWorkflow = changed(INFERENCE_SERVICE, InferenceServiceWorkflow)
ChangedRolloutWorkflow = changed(ROLLOUT, RolloutWorkflow)

CHANGED: dict[str, type[Any]] = {
    INSTANCE: ChangedInstanceWorkflow,
    INFERENCE_REPLICA: ChangedInferenceReplicaWorkflow,
    INFERENCE_SERVICE: ChangedInferenceServiceWorkflow,
    ROLLOUT: ChangedRolloutWorkflow,
}
"""Workflow type name -> its deliberately changed copy."""
