"""A thread-pool activity keeps heartbeating while a Kubernetes request of its waits
(`activities.keep_alive`), so the workflows can give Kubernetes calls a short heartbeat timeout
without a slow API server timing out a live attempt."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities import keep_alive
from activities.kube_rest import KubeRest
from kubesim.handle import KubeSim
from tests.fixtures.kubesim import SLOW_API_SECONDS

BEAT = 0.1


@pytest.fixture(autouse=True)
def fast_beats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keep_alive, "BEAT_SECONDS", BEAT)


def _read_namespaces(rest: KubeRest) -> dict[str, Any]:
    return rest.get("/api/v1/namespaces")


def test_a_regular_activity_heartbeats_while_its_request_waits(slow_kubesim: KubeSim) -> None:
    env = ActivityEnvironment()
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    listed = env.run(_read_namespaces, KubeRest(slow_kubesim.api_client()))
    assert listed["kind"] == "NamespaceList"
    # ~20 beats in a 2 s wait; a loaded machine may lose some, not all but 4.
    assert len(beats) >= 4, f"{len(beats)} heartbeat(s) during a {SLOW_API_SECONDS} s request"
    assert keep_alive._BEATS.waiting() == 0, "the request's activity is still kept alive after it returned"


def test_no_heartbeats_for_a_local_activity_or_a_client_made_without_keep_alive(slow_kubesim: KubeSim) -> None:
    local = ActivityEnvironment()
    local.info = dataclasses.replace(local.info, is_local=True)
    quiet = ActivityEnvironment()
    beats: list[str] = []
    local.on_heartbeat = lambda *details: beats.append("local")
    quiet.on_heartbeat = lambda *details: beats.append("keep_alive=False")
    local.run(_read_namespaces, KubeRest(slow_kubesim.api_client()))
    quiet.run(_read_namespaces, KubeRest(slow_kubesim.api_client(), keep_alive=False))
    assert beats == []


def test_outside_an_activity_a_request_registers_nothing(slow_kubesim: KubeSim) -> None:
    with keep_alive.waiting():
        assert keep_alive._BEATS.waiting() == 0
    assert _read_namespaces(KubeRest(slow_kubesim.api_client()))["kind"] == "NamespaceList"
