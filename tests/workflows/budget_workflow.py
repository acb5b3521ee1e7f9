"""A probe of `workflows.history_budget.hands_over` (tests/workflows/test_history_budget.py):
it asks at each `poke` and answers what it was told, without continuing as new."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows import history_budget

PROBE_PATCH = "probe-hands-over-early"


@workflow.defn(name="BudgetProbe")
class BudgetProbe:
    def __init__(self) -> None:
        self.pokes = 0
        self.answers: list[bool] = []

    @workflow.run
    async def run(self, state: str, pokes: int) -> list[bool]:
        started_at_size = history_budget.start_size()
        while len(self.answers) < pokes:
            await workflow.wait_condition(lambda: self.pokes > len(self.answers))
            self.answers.append(history_budget.hands_over(PROBE_PATCH, started_at_size))
        return self.answers

    @workflow.signal
    def poke(self, payload: str) -> None:
        self.pokes += 1

    @workflow.query
    def answered(self) -> int:
        return len(self.answers)
