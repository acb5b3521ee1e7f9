"""`workers.sandbox_runner`: an instance keeps only its most recently used answers, and asks again for one
it let go (the end-to-end check against the SDK's sandbox: tests/workflows/test_sandbox_runner.py)."""

from __future__ import annotations

from typing import Any

from workers.sandbox_runner import KEPT_PER_RUN, _ContextCachingInstance


class Sandboxed:
    """Stands in for a sandboxed instance: answers with the command asked about, and counts."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def get_serialization_context(self, command_info: Any) -> Any:
        self.asked.append(command_info)
        return ("context of", command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        self.asked.append(("store", command_info))
        return ("store of", command_info)


def test_each_command_is_asked_once_while_kept_and_again_once_let_go() -> None:
    sandboxed = Sandboxed()
    instance = _ContextCachingInstance(sandboxed)  # type: ignore[arg-type]
    for seq in range(3 * KEPT_PER_RUN):
        for _visit in range(3):
            assert instance.get_serialization_context(seq) == ("context of", seq)
    assert sandboxed.asked == list(range(3 * KEPT_PER_RUN))
    assert len(instance.contexts) == KEPT_PER_RUN
    newest = 3 * KEPT_PER_RUN - 1
    assert instance.get_serialization_context(newest) == ("context of", newest)
    assert instance.get_serialization_context(0) == ("context of", 0)  # let go long ago: asked again
    assert sandboxed.asked[-1] == 0 and len(sandboxed.asked) == 3 * KEPT_PER_RUN + 1
    # Used at every turn, the answer for payloads of no command is never the one to go.
    assert instance.get_serialization_context(None) == ("context of", None)
    for seq in range(1000, 1000 + 2 * KEPT_PER_RUN):
        instance.get_serialization_context(seq)
        instance.get_serialization_context(None)
    assert sandboxed.asked.count(None) == 1
    assert instance.get_external_store_context(None) == ("store of", None)
    assert instance.get_external_store_context(None) == ("store of", None)
    assert sandboxed.asked.count(("store", None)) == 1
