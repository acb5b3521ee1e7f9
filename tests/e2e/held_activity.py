"""A test-only workflow whose one activity runs until a file appears: an in-flight activity
that a test holds open across the worker's SIGTERM, then releases.

Its own module because the workflow sandbox re-imports the module that defines a workflow.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow

HELD = "ShutdownTestHeld"


@activity.defn(name="ShutdownTestHoldUntilReleased")
def hold_until_released(release_file: str) -> str:
    """Heartbeats until `release_file` exists, then returns; a plain `def`, so it runs on the
    worker's thread pool like the Kubernetes activities do."""
    while not Path(release_file).exists():
        activity.heartbeat()
        time.sleep(0.1)
    return "finished"


@workflow.defn(name=HELD)
class HeldWorkflow:
    @workflow.run
    async def run(self, release_file: str) -> str:
        return await workflow.execute_activity(
            hold_until_released,
            release_file,
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=30),
        )
