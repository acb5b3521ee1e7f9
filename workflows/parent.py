"""Signals between workflows that outlive each other: a child's report to its parent, and
a parent's word to a child that may have closed meanwhile (a Rollout run that completed).

Neither side may fail because the other is gone, terminated or not yet started again: a
failed delivery is logged and answered False, and the caller does not mark it sent (a
report is tried again with the then-current state; a closed run is taken as closed).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow


async def deliver(workflow_id: str, signal: str, payload: Any) -> bool:
    """Signal `payload` to `workflow_id`; False (logged) when it could not be delivered."""
    try:
        await workflow.get_external_workflow_handle(workflow_id).signal(signal, payload)
    except Exception as error:  # noqa: BLE001 - whatever the other workflow's fate, this one goes on
        workflow.logger.warning("could not signal %s to %s: %s", signal, workflow_id, error)
        return False
    return True
