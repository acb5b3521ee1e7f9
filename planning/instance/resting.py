"""When an Instance may wait for news with no safety timer of its own.

An Instance resting Ready, with no operation in flight and not draining, changes only when
a message arrives: a pod change from the watcher, or a request from its parent. A lost pod
change is then caught by the parent InferenceReplica's component re-list
(`planning.replica.recheck`), which checks exactly the Instances this rule names, so the
Instance's own five-minute re-list would only repeat it, at 24 Temporal actions an hour
per Instance. Every other phase keeps its safety re-list: an operation's progress is the
Instance's own to watch.
"""

from __future__ import annotations

from models.instance import InstanceOperation, InstancePhase


def rests_on_parent_net(phase: InstancePhase, operation: InstanceOperation | None, draining: bool) -> bool:
    """True when the parent's re-list covers this Instance (what its report says, or its state)."""
    return phase == InstancePhase.READY and operation is None and not draining
