"""The InferenceService controller (`python -m workers.controller`) when things go wrong or
around it: exactly the requests its ClusterRole grants, Temporal unreachable, a workflow that
does not answer, the process and SIGTERM, a follow cancelled, a standby's memory (the relay
itself: tests/workers/test_controller.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import urllib.request
from datetime import timedelta
from typing import Any

import kubernetes.client
import pytest
import yaml
from temporalio.client import Client

from planning.service.relay import RELAYED_ANNOTATION
from tests.fixtures.prometheus import free_port
from tests.unit.deploy_usage import logged_client
from tests.workers.controller_cluster import (
    DEPLOY_CONTROLLER,
    PAUSED,
    REPO_ROOT,
    Cluster,
    settled,
    until,
)
from tests.workers.test_controller_workflow import (
    HANGING_REVISION,
    REFUSE_LABEL,
)
from workers.control.service_controller import ISVCS, InferenceServiceController
from workers.control.temporal import TemporalSender
from workers.watch.stream import WatchItem
from workflows.names import isvc_workflow_id


def granted() -> set[tuple[str, str, str]]:
    """(group, resource, verb) the ClusterRole in deploy/controller.yaml grants."""
    role = next(doc for doc in yaml.safe_load_all(DEPLOY_CONTROLLER.read_text()) if doc["kind"] == "ClusterRole")
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


async def test_the_controller_sends_exactly_what_its_cluster_role_grants(cluster: Cluster) -> None:
    """Least privilege both ways: every request is allowed, every grant is used."""
    used: set[tuple[str, str, str]] = set()
    async with cluster.controller(logged_client(cluster.sim, used)) as controller:
        cluster.create("bad", labels={REFUSE_LABEL: "yes"})
        await until(lambda: cluster.events("SpecRejected", "bad"))
        cluster.patch("bad", {"spec": {"model": {"name": "other"}}})  # the same refusal: the Event's count
        await until(lambda: cluster.events("SpecRejected", "bad")[0].count == 2)
        cluster.create("chat", annotations={PAUSED: "true"})
        await until(lambda: RELAYED_ANNOTATION in cluster.annotations("chat"))
        cluster.create(
            "chat-engine",
            "inferencereplicas",
            spec={},
            labels={"ome.io/inferenceservice": "chat", "ome.io/component": "engine"},
            annotations={"ome.io/reset-instances": "all"},
        )
        await until(lambda: not cluster.annotations("chat-engine", "inferencereplicas"))
        await settled(controller)
    assert used - granted() == set(), "requests deploy/controller.yaml does not allow"
    assert granted() - used == set(), "grants in deploy/controller.yaml nothing uses"


class FlakySender(TemporalSender):
    """Temporal unreachable for the first `failures` messages of each kind."""

    def __init__(self, client: Client, task_queue: str, failures: int) -> None:
        super().__init__(client, task_queue)
        self.failures = {"apply": failures, "send": failures}

    def _fail(self, kind: str) -> None:
        if self.failures[kind] > 0:
            self.failures[kind] -= 1
            raise RuntimeError("Failed client connect: Server connection error (simulated)")

    async def apply(self, relay: Any) -> dict[str, Any]:
        self._fail("apply")
        return await super().apply(relay)

    async def send(self, request: Any) -> Any:
        self._fail("send")
        return await super().send(request)


async def test_temporal_unreachable_is_retried_with_back_off_and_nothing_is_lost_or_doubled(cluster: Cluster) -> None:
    sender = FlakySender(cluster.client, cluster.task_queue, failures=1)
    async with cluster.controller(sender=sender) as controller:
        cluster.create("chat", annotations={PAUSED: "true", "ome.io/rollout-promote": "abc"})
        await until(lambda: "ome.io/rollout-promote" not in cluster.annotations("chat"))
        await until(lambda: cluster.record("chat") == {PAUSED: "true"})
        await settled(controller)
    assert sender.failures == {"apply": 0, "send": 0}
    assert [call["name"] for call in await cluster.calls("chat")] == ["apply", "pause", "promote"]


async def test_a_workflow_that_does_not_answer_holds_no_slot_for_long(cluster: Cluster) -> None:
    """Every message to a workflow is bounded: with one slot, a promote stuck on its canary
    times out (transient: retried with a back-off) and lets another object through."""
    sender = TemporalSender(cluster.client, cluster.task_queue, rpc_timeout=timedelta(seconds=0.5))
    async with cluster.controller(sender=sender, concurrency=1) as controller:
        cluster.create("stuck")
        await until(lambda: cluster.calls("stuck", "apply"))
        cluster.annotate("stuck", **{"ome.io/rollout-promote": HANGING_REVISION})
        await until(lambda: cluster.calls("stuck", "promote"))
        cluster.create("next")
        await until(lambda: cluster.calls("next", "apply"))
        # Released: the retried Update (same ID) gets the answer; promote ran once.
        handle = cluster.client.get_workflow_handle(isvc_workflow_id(cluster.namespace, "stuck"))
        await handle.signal("unhang")
        await until(lambda: "ome.io/rollout-promote" not in cluster.annotations("stuck"), seconds=40)
        await settled(controller)
    assert [call["name"] for call in await cluster.calls("stuck")] == ["apply", "promote"]


async def test_python_m_workers_controller_relays_and_stops_on_sigterm(cluster: Cluster) -> None:
    """The process entry point: settings from the environment, one log line per relay, exit 0."""
    env = {
        **os.environ,
        "OME_TEMPORAL__ADDRESS": cluster.client.service_client.config.target_host,
        "OME_TEMPORAL__TASK_QUEUE": cluster.task_queue,
        "OME_KUBE__KUBECONFIG": str(cluster.sim.kubeconfig_path),
        "OME_PROMETHEUS__CONTROLLER_METRICS_ADDRESS": f"127.0.0.1:{free_port()}",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "workers.controller",
        env=env, cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        cluster.create("chat")
        await until(lambda: cluster.calls("chat", "apply"), seconds=30)
        # The state gauges are served (no InferenceReplica yet: the families alone).
        address = env["OME_PROMETHEUS__CONTROLLER_METRICS_ADDRESS"]
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read())
        assert b"# TYPE ome_instances gauge" in text
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 30)
    text = output.decode()
    assert process.returncode == 0, text
    assert f"isvc {cluster.namespace}/chat generation=1" in text
    assert f"applied to isvc/{cluster.namespace}/chat -> workflow generation=1 changed=True" in text


async def test_follow_cancels_the_reconciles_in_flight_and_leaves_their_objects_dirty() -> None:
    """Review finding 2: a controller that lost its Lease sends nothing more: an object whose
    Update is awaiting its answer is cancelled and stays dirty for the next `lead()`."""
    controller = InferenceServiceController(kubernetes.client.ApiClient(), None, None)  # type: ignore[arg-type]
    entered, key = asyncio.Event(), (ISVCS, "ns", "chat")

    async def awaiting_an_answer(_: Any) -> bool:
        entered.set()
        await asyncio.Event().wait()
        return True

    controller._reconcile = awaiting_an_answer  # type: ignore[method-assign]
    controller._dirty.add(key)
    await controller._pass()
    await entered.wait()
    task = controller._tasks[key]
    await controller.follow()
    assert task.cancelled() and not controller._tasks and key in controller._dirty


async def test_a_standby_controller_keeps_a_bounded_number_of_deleted_services(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 9: a standby never reconciles, so what it keeps of deletions is bounded."""
    monkeypatch.setattr("workers.control.service_controller.STANDBY_GONE_KEPT", 10)
    controller = InferenceServiceController(kubernetes.client.ApiClient(), None, None)  # type: ignore[arg-type]
    await controller.follow()
    for index in range(100):
        obj = {"metadata": {"namespace": "ns", "name": f"chat-{index}", "uid": f"u{index}"}}
        controller._apply(WatchItem(ISVCS, "ADDED", [obj]))
        controller._apply(WatchItem(ISVCS, "DELETED", [obj]))
    assert len(controller._gone) <= 11 and (ISVCS, "ns", "chat-99") in controller._gone
    assert len(controller._dirty) <= 11
