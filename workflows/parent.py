"""A child workflow's report to its parent, sent as a signal.

A child outlives a parent that is gone, terminated or not yet started again: a failed
report never fails the child, and the caller does not mark it sent, so the next report
tries again with the then-current state.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow


async def signal_parent(parent: str, signal: str, payload: Any) -> bool:
    """Signal `payload` to the workflow `parent`; False (logged) when it could not be delivered."""
    try:
        await workflow.get_external_workflow_handle(parent).signal(signal, payload)
    except Exception as error:  # noqa: BLE001 - whatever the parent's fate, the child goes on
        workflow.logger.warning("could not report to parent %s: %s", parent, error)
        return False
    return True
