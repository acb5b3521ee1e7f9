"""Shared test harness: fixtures live in tests/fixtures/, one module per external system.

Tests are marked by the directory they live in (`tests/unit` -> `unit`, `tests/e2e` -> `e2e`,
...), so `pytest -m "not e2e"` works without decorating every module. Tests marked `k3s` are
skipped, with the reason, when no Docker engine answers: they start k3s through testcontainers.
"""

from __future__ import annotations

import ast
import os
import threading
from functools import cache, wraps
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest_plugins = [
    "tests.fixtures.temporal",
    "tests.fixtures.kubesim",
    "tests.fixtures.prometheus",
    "tests.fixtures.workload",
]


def _serialize_ast_parse() -> None:
    """CPython 3.11.7 keeps the AST constructor's recursion depth in interpreter-wide state, so
    two threads building ASTs at once fail with `SystemError: AST constructor recursion depth
    mismatch`. Workflow threads do that whenever they log an exception (3.11's traceback module
    parses each line for its carets) while pytest parses source to show a failure: the error then
    ended a whole CI run as an INTERNALERROR. One lock around `ast.parse` keeps both correct."""
    parse = ast.parse
    lock = threading.RLock()

    @wraps(parse)
    def serialized(*args, **kwargs):  # type: ignore[no-untyped-def]
        with lock:
            return parse(*args, **kwargs)

    ast.parse = serialized


_serialize_ast_parse()

# Imported (and so rewritten by pytest) now, while no workflow thread runs: its plugin
# otherwise imports it at the session's end, and a run of one workflows module then raced the
# last test's workflow threads for the AST constructor (`_serialize_ast_parse`) and ended with
# that SystemError after every test had passed.
import hypothesis  # noqa: E402, F401

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

_TESTS_DIR = Path(__file__).parent
_DIRECTORY_MARKERS = {"unit", "kubesim", "workflows", "e2e", "k3s"}


@cache
def docker_unavailable_reason() -> str | None:
    """Why Docker cannot run the k3s tests, or None when an engine answers a ping."""
    import docker
    from docker.errors import DockerException

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        engine = docker.from_env(timeout=5)
        try:
            engine.ping()
        finally:
            engine.close()
    except DockerException as error:
        return f"no Docker engine answers at {where} ({error}); the k3s tests run k3s in Docker via testcontainers"
    return None


REAL_TIME_LANE = "real-time-e2e"
"""The xdist group of every `tests/e2e` test: `make test` runs two lanes (`-n 2 --dist
loadgroup`), the real-time e2e tests one after another in one and everything else, a module at
a time, in the other, so no two stack-driving tests (timing-sensitive chaos among them) share
the two cores."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark, group and order the tests before xdist's own hook reads the `xdist_group` marks:
    it suffixes each node id with its group there, and a mark added after it is ignored (every
    test was then scheduled on its own, e2e tests on both lanes at once)."""
    for item in items:
        relative = item.path.relative_to(_TESTS_DIR) if item.path.is_relative_to(_TESTS_DIR) else None
        if relative is not None and relative.parts[0] in _DIRECTORY_MARKERS:
            item.add_marker(relative.parts[0])
        # A module's tests stay together (module fixtures are built once); e2e is one lane.
        lane = REAL_TIME_LANE if item.get_closest_marker("e2e") is not None else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(lane))
    # The e2e lane is the longest unit: first in the queue, so it starts on its own worker at once.
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)
    k3s_items = [item for item in items if item.get_closest_marker("k3s") is not None]
    reason = docker_unavailable_reason() if k3s_items else None
    if reason is not None:
        for item in k3s_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(optionalhook=True)  # only xdist defines it: `-p no:xdist` runs without
def pytest_xdist_node_collection_finished(node: WorkerController, ids: list[str]) -> None:
    """Refuse to run lanes that are not lanes: when xdist's loadgroup left a node id without its
    group suffix (pytest 9.2 with xdist 3.8 does), every test would be scheduled on its own."""
    ungrouped = [nodeid for nodeid in ids if "@" not in nodeid]
    if node.config.getvalue("dist") == "loadgroup" and ungrouped:
        pytest.exit(
            f"pytest-xdist --dist loadgroup did not group {len(ungrouped)} tests (first: {ungrouped[0]}): "
            f"pytest {pytest.__version__} is not a version it supports; install the versions pyproject.toml "
            "pins (`make test` does)",
            returncode=4,
        )
