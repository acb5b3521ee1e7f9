"""Name, input and result of the activity that signals another workflow with the worker's client.

A workflow that reports often (an Instance to its InferenceReplica) sends through this local
activity instead of a signal command: one marker in its history instead of the initiated and
signalled events and the workflow task the delivery wakes. `activities/workflow_signals.py`
registers it; `workflows/parent.py` calls it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

SIGNAL_WORKFLOW = "temporal.signal_workflow"


class SignalWorkflowInput(BaseModel):
    """Signal `signal` with `payload` (a model dumped to JSON) to the latest run of `workflow_id`."""

    model_config = ConfigDict(extra="forbid")

    workflow_id: str
    signal: str
    payload: dict[str, Any]
    busy_within_seconds: float | None = None
    """How long a workflow the server calls busy (closing: a continue-as-new tried again) is
    tried again before the answer is `busy`, not delivered; None: until the activity's timeout.
    A sender whose next step must not wait on the delivery sets it and sends again shortly."""


class SignalWorkflowResult(BaseModel):
    """`delivered` False: no such workflow is running (it ended or never started)."""

    model_config = ConfigDict(extra="forbid")

    delivered: bool
    reason: str = ""
    busy: bool = False
    """Not delivered: the workflow was still busy after `busy_within_seconds`."""
