"""The harness's own rules: tests are marked by their directory, and the k3s skip says why."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import docker_unavailable_reason


def test_tests_are_marked_by_their_directory(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("e2e") is None


def test_the_docker_skip_reason_names_the_engine_address(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    host = f"tcp://127.0.0.1:{closed_port}"
    monkeypatch.setenv("DOCKER_HOST", host)
    docker_unavailable_reason.cache_clear()
    try:
        reason = docker_unavailable_reason()
    finally:
        docker_unavailable_reason.cache_clear()
    assert reason is not None
    assert reason.startswith(f"no Docker engine answers at {host}")
    assert "k3s" in reason
