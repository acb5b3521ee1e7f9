"""The SDK sandbox, with each command's serialization context asked of it once.

Before the worker decodes an activation and after it encodes a completion, the SDK visits every
payload three times (references, external storage, codec), and for each visit asks the
workflow instance which serialization context applies to the payload's command
(`WorkflowInstance.get_serialization_context`, and `get_external_store_context`). A sandboxed
instance answers by `exec` of a code string inside the sandbox, with its import hooks applied
around it: each answer compiles that string and swaps the hooks in and out. On issue 17's bench
(200 Instances through a SurgeThenDrain update) those answers were about a third of the
worker's event-loop time (py-spy), for contexts that never change.

The answer for a command does not change during a run: it names the command's own target (the
activity, the child workflow, the signalled workflow), set when the workflow issued the
command, and a command's sequence number is never reused within a run. The payloads of no
command (`None`) always get the workflow's own context. So `ContextCachingSandboxRunner`
keeps each instance's most recently used answers, per command (`KEPT_PER_RUN`; an evicted run
gets a new instance and starts afresh). Everything else goes to the sandboxed instance
unchanged: the workflow code still runs in the sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

KEPT_PER_RUN = 32
"""Answers an instance keeps of each kind (serialization, external store), the most recently
used: a command's payloads are visited when the workflow issues it and when its result comes
back, mostly in the same or the next few workflow tasks. An answer let go is asked again if ever
needed (the same answer, one `exec` more), so a run that issues thousands of commands before it
continues as new holds 32, not thousands, in each of the (by default 5,000) cached runs."""


def _kept(answers: dict[Any, Any], command_info: Any, ask: Callable[[Any], Any]) -> Any:
    """The answer for `command_info`, asked of `ask` unless kept; the least recently used goes."""
    try:
        answer = answers.pop(command_info)
    except KeyError:
        answer = ask(command_info)
        if len(answers) >= KEPT_PER_RUN:
            del answers[next(iter(answers))]
    answers[command_info] = answer
    return answer


class _ContextCachingInstance(WorkflowInstance):
    """A sandboxed workflow instance whose serialization contexts are kept per command."""

    def __init__(self, sandboxed: WorkflowInstance) -> None:
        self.sandboxed = sandboxed
        self.contexts: dict[Any, Any] = {}
        self.store_contexts: dict[Any, Any] = {}

    def activate(self, act: Any) -> Any:
        return self.sandboxed.activate(act)

    def get_serialization_context(self, command_info: Any) -> Any:
        return _kept(self.contexts, command_info, self.sandboxed.get_serialization_context)

    def get_external_store_context(self, command_info: Any) -> Any:
        return _kept(self.store_contexts, command_info, self.sandboxed.get_external_store_context)

    def get_info(self) -> Any:
        return self.sandboxed.get_info()

    def get_thread_id(self) -> int | None:
        return self.sandboxed.get_thread_id()


@dataclass(frozen=True)
class ContextCachingSandboxRunner(SandboxedWorkflowRunner):
    """`SandboxedWorkflowRunner` whose instances ask the sandbox for a command's serialization
    context once (see the module's docstring)."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _ContextCachingInstance(super().create_instance(det))
