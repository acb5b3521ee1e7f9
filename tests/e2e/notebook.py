"""A test-only workflow that holds state until closed: proof that a history survives restarts.

It lives in a module of its own because the workflow sandbox re-imports the defining module,
and test modules import I/O libraries (kubernetes, urllib) the sandbox rightly refuses.
"""

from __future__ import annotations

from temporalio import workflow

NOTEBOOK = "StackTestNotebook"


@workflow.defn(name=NOTEBOOK)
class NotebookWorkflow:
    """Collects notes until closed, then returns them; its notes survive only if its history does."""

    @workflow.init
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.closed = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.closed)
        return self.notes

    @workflow.signal(name="note")
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.signal(name="close")
    def close(self) -> None:
        self.closed = True

    @workflow.query(name="notes")
    def current_notes(self) -> list[str]:
        return self.notes
