"""When an Instance may wait for news with no safety timer of its own.

An Instance resting Ready, with no operation in flight and not draining, changes only when
a message arrives: a pod change from the watcher, or a request from its parent. A lost pod
change is then caught by the parent InferenceReplica's component re-list
(`planning.replica.recheck`), which checks exactly the Instances this rule names, so the
Instance's own five-minute re-list would only repeat it, at 24 Temporal actions an hour
per Instance; it keeps a six-hour backstop (`PARENT_NET_BACKSTOP`) in case the parent is
stuck or gone, and only while its parent has its latest report (a failed report keeps the
short timer, so it is retried). Every other phase keeps its safety re-list: an operation's progress is the
Instance's own to watch.
"""

from __future__ import annotations

from datetime import timedelta

from models.instance import InstanceOperation, InstancePhase

PARENT_NET_BACKSTOP = timedelta(hours=6)
"""How long an Instance resting on its parent's net waits before re-listing its own pods
anyway: the backstop for a parent that is stuck, failed or gone. One timer and one list
every six hours is 1/3 Temporal action an hour, inside issue 17's one per Instance-hour."""


def rests_on_parent_net(phase: InstancePhase, operation: InstanceOperation | None, draining: bool) -> bool:
    """True when the parent's re-list covers this Instance (what its report says, or its state)."""
    return phase == InstancePhase.READY and operation is None and not draining
