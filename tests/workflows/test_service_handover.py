"""The InferenceService's continue-as-new while a canary Update waits for its answer.

A canary request (`promote`, `rollback`, `retry`, `repin`) is answered by the `Rollout` run,
and only the service's main loop forwards it there. When Temporal suggests continue-as-new
while such an Update waits, the loop must go on serving until the Update is answered, then
hand over: a loop that waited for the handlers first left the Update to its 60 s timeout
("outcome unknown"), which CI caught once when the dev server's low suggestion threshold (200
events) was crossed at that moment. Here the suggestion is switched on for the service's
current run just before the Update, so the moment is the same every time.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from temporalio import workflow
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.workers.omectl.test_rollout_cli import at_manual_gate, canary_at_its_gate
from tests.workflows.service_harness import eventually

pytestmark = pytest.mark.workflows

ANSWERED_WITHIN = 30.0
"""Well under the Update's 60 s wait for its answer (`canary_requests.ANSWER_WITHIN_SECONDS`)."""


async def test_a_promote_waiting_when_continue_as_new_is_suggested_is_answered_then_the_run_hands_over(
    dev_client: Client, task_queue: str, kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From the history length the run had when the test switched it on: a replay of the run
    # (after an eviction) sees the suggestion exactly where the run itself first saw it.
    suggested_from: dict[str, int] = {}
    original = workflow.Info.is_continue_as_new_suggested

    def suggested(info: workflow.Info) -> bool:
        since = suggested_from.get(info.run_id)
        return original(info) or (since is not None and info.get_current_history_length() >= since)

    monkeypatch.setattr(workflow.Info, "is_continue_as_new_suggested", suggested)
    async with canary_at_its_gate(dev_client, task_queue, kubesim) as s:
        described = await s.handle().describe()
        before = described.run_id
        assert before is not None
        suggested_from[before] = described.raw_description.workflow_execution_info.history_length

        answer: str | None = None
        with contextlib.suppress(TimeoutError):
            answer = await asyncio.wait_for(
                s.handle().execute_update("promote", None, result_type=str), ANSWERED_WITHIN
            )
        if answer is None:
            pytest.fail(f"promote not answered within {ANSWERED_WITHIN} s: the loop waited for the handlers to hand over")
        assert answer.startswith("promote accepted: "), answer

        async def handed_over() -> bool:
            return (await s.handle().describe()).run_id != before

        await eventually(handed_over, "the run continued as new once the Update was answered", within=30)

        # The new run carries the promoted canary on past its manual gate.
        async def past_the_gate() -> bool:
            return not await at_manual_gate(s)

        await eventually(past_the_gate, "the promoted canary past its manual gate", within=60)
