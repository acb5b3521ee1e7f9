"""A signal sink that records what the pod watcher sends, in place of Temporal (the watcher
tests against kubesim and against k3s)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from models.pods import InstancePods

WAIT_SECONDS = 30.0
"""How long `wait` waits by default for a summary to arrive."""


class RecordingSink:
    """Collects signals; workflow ids in `missing` answer like a workflow that does not exist."""

    def __init__(self, missing: set[str] | None = None, within: float = WAIT_SECONDS) -> None:
        self.sent: list[tuple[str, InstancePods]] = []
        self.missing = missing or set()
        self.within = within
        self._changed = asyncio.Event()

    async def __call__(self, workflow_id: str, summary: InstancePods) -> bool:
        if workflow_id in self.missing:
            return False
        self.sent.append((workflow_id, summary))
        self._changed.set()
        return True

    def to(self, workflow_id: str) -> list[InstancePods]:
        return [summary for wid, summary in self.sent if wid == workflow_id]

    async def wait(self, workflow_id: str, check: Callable[[InstancePods], bool], what: str) -> InstancePods:
        """The first summary sent to `workflow_id` (latest first) that passes `check`."""
        try:
            async with asyncio.timeout(self.within):
                while True:
                    for summary in reversed(self.to(workflow_id)):
                        if check(summary):
                            return summary
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no summary to {workflow_id} showed {what}; sent: {self.to(workflow_id)}") from None

    def assert_no_repeats(self) -> None:
        last: dict[str, InstancePods] = {}
        for workflow_id, summary in self.sent:
            assert not summary.same_state(last.get(workflow_id)), (
                f"{workflow_id} got the same summary twice in a row"
            )
            last[workflow_id] = summary
