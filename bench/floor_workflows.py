"""The floor the lifecycle bench compares against: one workflow per Instance doing nothing.

A design with one workflow per Instance cannot bring up N Instances faster than the same
Temporal server can run one parent that starts N child workflows, each of which runs one
activity that does nothing. This module holds that design, bench-only:

- `BenchFloorParent` starts its N `BenchFloorChild` children in its first workflow task and
  waits for them all (or, for comparison, one start per workflow task);
- each `BenchFloorChild` runs the no-op activity `BenchNoop` once;
- `python -m bench.floor_workflows --address HOST:PORT --task-queue Q` runs a worker for the
  three of them in its own process, set up like the product's worker (same sandbox
  pass-through, same data converter, a thread pool of the same size for synchronous
  activities), so the only difference the bench measures is the work our workflows do.

Nothing here is registered by the product's worker.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.worker import Worker

FLOOR_PARENT = "BenchFloorParent"
FLOOR_CHILD = "BenchFloorChild"
NOOP_ACTIVITY = "BenchNoop"
READY_LINE = "floor worker polling"
"""Printed once the floor worker polls its task queue; the bench waits for it."""


class FloorInput(BaseModel):
    """How many children the parent starts, and the prefix of their workflow IDs."""

    children: int
    id_prefix: str
    one_start_per_task: bool = False
    """Await each child's start before issuing the next (one workflow task per start), as a
    loop of `await start_child_workflow(...)` does; the bench prints both variants."""


@activity.defn(name=NOOP_ACTIVITY)
def noop(index: int) -> int:
    """A synchronous activity, like the product's Kubernetes activities, that does nothing."""
    return index


@workflow.defn(name=FLOOR_CHILD)
class FloorChild:
    @workflow.run
    async def run(self, index: int) -> int:
        result: int = await workflow.execute_activity(
            NOOP_ACTIVITY, index, start_to_close_timeout=timedelta(seconds=30), result_type=int
        )
        return result


@workflow.defn(name=FLOOR_PARENT)
class FloorParent:
    @workflow.run
    async def run(self, request: FloorInput) -> int:
        if request.one_start_per_task:
            handles = [
                await workflow.start_child_workflow(
                    FLOOR_CHILD, index, id=f"{request.id_prefix}-{index}", result_type=int
                )
                for index in range(request.children)
            ]
            results = await asyncio.gather(*handles)
            return len(results)
        # Every start command goes out in the first workflow task: the fastest this design
        # can be, so the product's ratio to it is not flattered by a slow floor.
        results = await asyncio.gather(
            *(
                workflow.execute_child_workflow(
                    FLOOR_CHILD, index, id=f"{request.id_prefix}-{index}", result_type=int
                )
                for index in range(request.children)
            )
        )
        return len(results)


async def serve(address: str, task_queue: str) -> None:
    """Run the floor worker until SIGTERM or SIGINT."""
    # Imported here so that the bench, which imports this module for the names and the
    # workflow input, does not need the product's worker wiring to be importable first.
    from temporalio.worker import UnsandboxedWorkflowRunner
    from temporalio.worker.workflow_sandbox import SandboxRestrictions

    from workers.client import connect
    from workers.config import Settings, TemporalSettings
    from workers.sandbox_runner import ContextCachingSandboxRunner
    from workers.worker import MAX_CONCURRENT_ACTIVITIES

    client = await connect(TemporalSettings(address=address, task_queue=task_queue))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    with ThreadPoolExecutor(max_workers=MAX_CONCURRENT_ACTIVITIES, thread_name_prefix="activity") as pool:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[FloorParent, FloorChild],
            activities=[noop],
            activity_executor=pool,
            max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
            workflow_runner=ContextCachingSandboxRunner(
                restrictions=SandboxRestrictions.default.with_passthrough_modules("bench", "pydantic")
            )
            if Settings().worker.sandbox
            else UnsandboxedWorkflowRunner(),
            graceful_shutdown_timeout=timedelta(seconds=5),
        )
        async with worker:
            print(f"{READY_LINE} on task queue {task_queue!r} at {address}", flush=True)
            await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.floor_workflows", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--address", required=True, help="Temporal frontend host:port")
    parser.add_argument("--task-queue", required=True, help="task queue to poll")
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.task_queue))


if __name__ == "__main__":
    main()
