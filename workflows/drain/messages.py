"""The `Drain` workflow's contract: its input, its messages, and what it answers.

    temporal workflow start --type Drain --task-queue ome-lifecycle \\
        --workflow-id drain/node/gpu-node-1 \\
        --input '{"node": "gpu-node-1", "reason": "kernel upgrade", "timeout": "2h"}'
    temporal workflow query  --workflow-id drain/node/gpu-node-1 --name status
    temporal workflow signal --workflow-id drain/node/gpu-node-1 --name release
    temporal workflow signal --workflow-id drain/node/gpu-node-1 --name cancel

Workflows import this module inside `workflow.unsafe.imports_passed_through()`.
"""

from __future__ import annotations

from models.base import MessageModel
from planning.drain.state import DrainState
from planning.drain.status import DrainStatus, Waiting
from planning.drain.texts import DrainPhase

# --- message names (`temporal workflow signal --workflow-id drain/node/... --name ...`) ----
SIGNAL_RELEASE = "release"
"""Uncordon the node and end (`Released`). Before the node is drained it also stops moving:
no new migration or eviction starts, the migrations in flight are let finish (each is a whole
unit, replacement first; `cancel` instead throws their replacements away), then the node is
uncordoned. A `cancel` while they finish cancels them."""
SIGNAL_CANCEL = "cancel"
"""Stop moving (migrations in flight are cancelled: their replacements go, the sources
stay), uncordon the node and end (`Cancelled`)."""
QUERY_STATUS = "status"


class DrainInput(MessageModel):
    """What a `Drain` starts from. Checked before anything is cordoned."""

    node: str = ""
    """Required; '' (or left out) is refused with an error naming the field, not a decoding
    failure the workflow task would retry forever."""
    reason: str = ""
    """Why the node is drained; carried into every migration request."""
    timeout: str | None = None
    """A Go duration (`30m`, `2h`): after it nothing more moves and the node stays cordoned
    until `release` or `cancel` (`TimedOut`). None: no limit."""


__all__ = ["DrainInput", "DrainPhase", "DrainState", "DrainStatus", "Waiting"]
