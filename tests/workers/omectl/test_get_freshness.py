"""`omectl get instances|retry-blocks|migrations` judge each InferenceReplica's status against its
service's `status` query: older than the generation in force is STALE (no REL), and nothing is
releasable while the service is being deleted (spec reference §9, §11, §13). The reads are
replaced, so no server is needed."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from models.inferencereplica import InferenceReplicaSpec, InferenceReplicaStatus
from tests.workers.omectl.cli import exit_with
from workers.omectl import get, reads, session
from workers.omectl.app import app
from workflows.service.messages import ServiceStatusView

ENV = {"OME_OTEL__OTLP_ENDPOINT": None}
STATUS = {
    "observedGeneration": 1,
    "instanceStatuses": [{"index": 0, "phase": "Ready", "runningRevision": "chat-engine-5d9c7b8f"}],
    "retryBlocks": [{"targetRevision": "chat-engine-0badcafe", "state": "Held", "attemptsStarted": 1}],
    "migrations": [{"uuid": "u1", "instance": 0, "phase": "Accepted"}],
}


def fake_reads(monkeypatch: pytest.MonkeyPatch, generation: int, deleting: bool) -> None:
    view = ServiceStatusView.model_validate(
        {"name": "chat", "namespace": "ns", "generation": generation, "phase": "Ready", "paused": False,
         "deleting": deleting, "status": {}}
    )
    answer = reads.ReplicaAnswer(
        "irep/ns/chat-engine",
        InferenceReplicaStatus.model_validate(STATUS),
        InferenceReplicaSpec(inference_service="chat", component="engine", revision="chat-engine-5d9c7b8f"),
        None,
    )

    async def connected() -> Any:
        return object()

    async def service_status(*_: Any) -> ServiceStatusView:
        return view

    async def services(*_: Any) -> reads.Listing[tuple[ServiceStatusView, None]]:
        return reads.Listing([(view, None)], [])

    async def replicas(*_: Any) -> reads.Listing[reads.ReplicaAnswer]:
        return reads.Listing([answer], [])

    monkeypatch.setattr(session, "finish", exit_with)
    monkeypatch.setattr(get, "client", connected)
    monkeypatch.setattr(reads, "service_status", service_status)
    monkeypatch.setattr(reads, "services", services)
    monkeypatch.setattr(reads, "replicas", replicas)


def cells(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["get", *args, "-n", "ns"], env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()[1].split()


@pytest.mark.parametrize("name", [("chat",), ()], ids=["one-service", "namespace"])
def test_current_status_of_a_live_service(monkeypatch: pytest.MonkeyPatch, name: tuple[str, ...]) -> None:
    fake_reads(monkeypatch, generation=1, deleting=False)
    assert cells("instances", *name)[-1] == "OK"
    assert cells("retry-blocks", *name)[5] == "YES"
    assert cells("migrations", *name)[1] == "Accepted/Active/Current"


@pytest.mark.parametrize("name", [("chat",), ()], ids=["one-service", "namespace"])
def test_status_older_than_the_service_is_stale(monkeypatch: pytest.MonkeyPatch, name: tuple[str, ...]) -> None:
    fake_reads(monkeypatch, generation=2, deleting=False)
    assert cells("instances", *name)[-1] == "STALE:1/2"
    assert cells("retry-blocks", *name)[5] == "NO"
    assert cells("migrations", *name)[1] == "Accepted/Active/Stale"


def test_nothing_is_releasable_while_the_service_is_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_reads(monkeypatch, generation=1, deleting=True)
    assert cells("retry-blocks", "chat")[5] == "NO"


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        ("irep", "status", None),
        ("instances", "instanceStatuses", STATUS["instanceStatuses"]),
        ("retry-blocks", "retryBlocks", STATUS["retryBlocks"]),
        ("migrations", "migrations", STATUS["migrations"]),
    ],
)
@pytest.mark.parametrize("output", ["json", "yaml"])
def test_json_and_yaml_name_the_workflow_and_component(
    monkeypatch: pytest.MonkeyPatch, kind: str, key: str, value: Any, output: str
) -> None:
    fake_reads(monkeypatch, generation=1, deleting=False)
    result = CliRunner().invoke(app, ["get", kind, *(() if kind == "irep" else ("chat",)), "-n", "ns", "-o", output], env=ENV)
    assert result.exit_code == 0, result.output
    (shown,) = yaml.safe_load(result.stdout)  # JSON is YAML
    assert (shown["workflow_id"], shown["component"]) == ("irep/ns/chat-engine", "engine")
    if value is None:
        assert shown[key]["observedGeneration"] == 1 and shown[key]["retryBlocks"][0]["state"] == "Held"
    else:
        assert [{k: v for k, v in item.items() if k in entry} for item, entry in zip(shown[key], value, strict=True)] == value
