"""End-to-end fixtures: one running stack for the session, driven like a user drives it.

Tests use `stack.temporal(...)` for the CLI the README shows, `await stack.client()` for a
client from the product's factory and `stack.kubeconfig` for the cluster the worker sees. A
test that needs a stack of its own (restarts, crashes) builds a `RunningStack` itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.running_stack import RunningStack, stack_running


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """The local stack on free ports with a fresh data directory, stopped after the session."""
    with stack_running(tmp_path_factory.mktemp("stack")) as running:
        yield running
