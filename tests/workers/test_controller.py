"""The InferenceService controller (`python -m workers.controller`) against kubesim and a real
Temporal dev server, with a stand-in InferenceService workflow
(`tests.workers.test_controller_workflow`) that records every message it receives: `kubectl
apply`, `annotate` and `delete` drive the workflow exactly once each, across restarts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import kubernetes.client
import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from kubesim.handle import KubeSim
from planning.service.relay import ISVC_FINALIZER, RELAYED_ANNOTATION
from tests.fixtures.metrics_scrape import scrape_samples
from tests.fixtures.prometheus import free_port
from tests.unit.deploy_usage import logged_client
from tests.workers.test_controller_workflow import (
    ADMISSION_MESSAGE,
    HANGING_REVISION,
    REFUSE_LABEL,
    FakeInferenceService,
)
from workers.control.kube import KubeWriter
from workers.control.metrics_server import StateMetricsServer
from workers.control.service_controller import ISVCS, InferenceServiceController
from workers.control.temporal import TemporalSender
from workers.watch.stream import WatchItem
from workflows.names import isvc_workflow_id

GROUP, VERSION = "ome.io", "v1beta1"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_CONTROLLER = REPO_ROOT / "deploy" / "controller.yaml"
PAUSED = "ome.io/rollout-paused"
WAIT_SECONDS = 10.0


async def until(check: Callable[[], Any], seconds: float = WAIT_SECONDS) -> Any:
    """Poll `check` (sync or async) until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not met within {seconds}s")
        await asyncio.sleep(0.05)


class Cluster:
    """kubectl, the stand-in workflow and controller instances for one test namespace."""

    def __init__(self, sim: KubeSim, client: Client, task_queue: str) -> None:
        self.sim = sim
        self.client = client
        self.task_queue = task_queue
        self.namespace = f"ctl-{uuid4().hex[:8]}"
        self.custom = kubernetes.client.CustomObjectsApi(sim.api_client())
        self.core = kubernetes.client.CoreV1Api(sim.api_client())
        self.core.create_namespace({"metadata": {"name": self.namespace}})

    # --- kubectl ------------------------------------------------------------------------

    def create(self, name: str, plural: str = "inferenceservices", **metadata: Any) -> dict[str, Any]:
        spec = metadata.pop("spec", {"model": {"name": "llama"}, "runtime": {"name": "rt"}})
        kind = {"inferenceservices": "InferenceService", "inferencereplicas": "InferenceReplica",
                "servingruntimes": "ServingRuntime", "trafficmaps": "TrafficMap"}[plural]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name, "namespace": self.namespace, **metadata},
            "spec": spec,
        }
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)

    def patch(self, name: str, body: dict[str, Any], plural: str = "inferenceservices") -> dict[str, Any]:
        return self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name, body)

    def annotate(self, name: str, plural: str = "inferenceservices", **annotations: str | None) -> None:
        self.patch(name, {"metadata": {"annotations": annotations}}, plural)

    def get(self, name: str, plural: str = "inferenceservices") -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def annotations(self, name: str, plural: str = "inferenceservices") -> dict[str, str]:
        return ((self.get(name, plural) or {}).get("metadata") or {}).get("annotations") or {}

    def record(self, name: str) -> dict[str, str]:
        return json.loads(self.annotations(name).get(RELAYED_ANNOTATION) or "{}")

    def events(self, reason: str, name: str | None = None) -> list[Any]:
        listed = self.core.list_namespaced_event(self.namespace).items
        return [e for e in listed if e.reason == reason and (name is None or e.involved_object.name == name)]

    # --- the workflow -------------------------------------------------------------------

    async def calls(self, name: str, message: str | None = None) -> list[dict[str, Any]]:
        handle = self.client.get_workflow_handle(isvc_workflow_id(self.namespace, name))
        try:
            calls = await handle.query("calls", result_type=list)
        except RPCError:
            return []
        return [call for call in calls if message is None or call["name"] == message]

    async def count(self, name: str, message: str) -> int:
        return len(await self.calls(name, message))

    @asynccontextmanager
    async def controller(
        self, api_client: Any = None, sender: TemporalSender | None = None, concurrency: int = 32
    ) -> AsyncIterator[InferenceServiceController]:
        controller = InferenceServiceController(
            api_client or self.sim.api_client(),
            sender or TemporalSender(self.client, self.task_queue),
            KubeWriter(api_client or self.sim.api_client()),
            coalesce_seconds=0.02,
            concurrency=concurrency,
        )
        await controller.start()
        try:
            await asyncio.wait_for(controller.wait_synced(), WAIT_SECONDS)
            yield controller
        finally:
            await controller.stop()


@pytest.fixture
async def cluster(dev_client: Client, kubesim: KubeSim, task_queue: str) -> AsyncIterator[Cluster]:
    async with Worker(
        dev_client,
        task_queue=task_queue,
        workflows=[FakeInferenceService],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        yield Cluster(kubesim, dev_client, task_queue)


async def settled(controller: InferenceServiceController) -> None:
    """Let the controller finish what it was doing, and a little more (a resend would show)."""
    await until(controller.idle)
    await asyncio.sleep(0.3)
    await until(controller.idle)


async def test_apply_once_per_edit_and_a_restart_sends_nothing_already_sent(cluster: Cluster) -> None:
    async with cluster.controller() as controller:
        created = cluster.create("chat")
        applies = await until(lambda: cluster.calls("chat", "apply"))
        assert applies[0]["input"]["origin"] == {
            "object_generation": 1,
            "uid": created["metadata"]["uid"],
            "resource_version": created["metadata"]["resourceVersion"],
        }
        cluster.patch("chat", {"spec": {"model": {"name": "llama-2"}}})
        await until(lambda: _count_is(cluster, "chat", "apply", 2))
        # A control annotation is a signal, not a new spec.
        cluster.annotate("chat", **{PAUSED: "freeze"})
        pauses = await until(lambda: cluster.calls("chat", "pause"))
        assert pauses[0]["input"] == {"mode": "freeze"}
        await until(lambda: cluster.record("chat") == {PAUSED: "freeze"})
        await settled(controller)
        assert await cluster.count("chat", "apply") == 2
        assert await cluster.count("chat", "pause") == 1
        # `ome.io/traffic-drain` is spec (no new generation, a new digest): an apply.
        cluster.annotate("chat", **{"ome.io/traffic-drain": "true"})
        await until(lambda: _count_is(cluster, "chat", "apply", 3))
        applies = await cluster.calls("chat", "apply")
        assert applies[-1]["input"]["object_generation"] == 2

    # Stopped: the pause annotation is removed meanwhile; a new controller resumes (it was
    # recorded) and sends nothing else.
    cluster.annotate("chat", **{PAUSED: None})
    async with cluster.controller() as restarted:
        await until(lambda: cluster.calls("chat", "resume"))
        await until(lambda: RELAYED_ANNOTATION not in cluster.annotations("chat"))
        await settled(restarted)
    calls = [call["name"] for call in await cluster.calls("chat")]
    assert calls == ["apply", "apply", "pause", "apply", "resume"]

    # A pause sent with the `temporal` CLI (nothing recorded) is not lifted by the controller.
    cluster.create("other")
    async with cluster.controller() as third:
        await until(lambda: cluster.calls("other", "apply"))
        handle = cluster.client.get_workflow_handle(isvc_workflow_id(cluster.namespace, "other"))
        await handle.signal("pause", {"mode": "true"})
        cluster.annotate("other", note="touched")
        await until(lambda: cluster.annotations("other").get("note") == "touched")
        await settled(third)
    assert [call["name"] for call in await cluster.calls("other")] == ["apply", "pause", "apply"]
    assert [call["name"] for call in await cluster.calls("chat")] == ["apply", "apply", "pause", "apply", "resume"]


async def _count_is(cluster: Cluster, name: str, message: str, expected: int) -> bool:
    return await cluster.count(name, message) == expected


async def test_an_annotation_edit_back_to_an_earlier_value_is_relayed(cluster: Cluster) -> None:
    """`ome.io/traffic-drain` set, then removed, at one generation: the manifest is the first
    one again, and the workflow, which holds the drained one, must get it (no dedup by
    (generation, digest) in the controller, nor by the Update ID in Temporal)."""
    drain = "ome.io/traffic-drain"
    async with cluster.controller() as controller:
        cluster.create("chat")
        await until(lambda: cluster.calls("chat", "apply"))
        cluster.annotate("chat", **{drain: '{"weight": 0}'})
        await until(lambda: _count_is(cluster, "chat", "apply", 2))
        cluster.annotate("chat", **{drain: None})
        await until(lambda: _count_is(cluster, "chat", "apply", 3))
        cluster.annotate("chat", **{drain: '{"weight": 0}'})
        await until(lambda: _count_is(cluster, "chat", "apply", 4))
        await settled(controller)
    applies = [call["input"] for call in await cluster.calls("chat", "apply")]
    assert len(applies) == 4
    assert [apply["object_generation"] for apply in applies] == [1, 1, 1, 1]
    assert applies[2]["digest"] == applies[0]["digest"] != applies[1]["digest"] == applies[3]["digest"]
    handle = cluster.client.get_workflow_handle(isvc_workflow_id(cluster.namespace, "chat"))
    assert (await handle.query("applied", result_type=dict))["digest"] == applies[1]["digest"]


async def test_canary_annotations_are_answered_once_and_refusals_become_warning_events(cluster: Cluster) -> None:
    async with cluster.controller() as controller:
        cluster.create("canary")
        await until(lambda: cluster.calls("canary", "apply"))

        cluster.annotate("canary", **{"ome.io/rollout-promote": "abc123"})
        await until(lambda: "ome.io/rollout-promote" not in cluster.annotations("canary"))
        assert (await cluster.calls("canary", "promote"))[0]["input"]["revision"] == "abc123"

        cluster.annotate("canary", **{"ome.io/rollout-promote": "stale"})
        events = await until(lambda: cluster.events("AnnotationRefused", "canary"))
        assert events[0].type == "Warning"
        assert events[0].message == "action refused: canary revision stale is not the active canary"
        await until(lambda: "ome.io/rollout-promote" not in cluster.annotations("canary"))

        cluster.annotate("canary", **{"ome.io/rollout-rollback": "true", "ome.io/rollout-repin": "now"})
        await until(lambda: cluster.calls("canary", "rollback"))
        await until(lambda: "ome.io/rollout-repin" not in cluster.annotations("canary"))
        assert (await cluster.calls("canary", "repin"))[0]["input"]["digest"] == "now"
        await until(lambda: cluster.record("canary").get("ome.io/rollout-rollback") == "true")
        assert cluster.annotations("canary")["ome.io/rollout-rollback"] == "true"

        refused_key = "ome.io/migration-request-v1-11111111-aaaa"
        accepted_key = "ome.io/migration-request-v1-22222222-bbbb"
        cluster.annotate(
            "canary",
            **{
                refused_key: json.dumps({"component": "bogus", "instance": 0, "from_node": "gpu-node-1"}),
                accepted_key: json.dumps({"component": "engine", "instance": 0, "from_node": "gpu-node-1"}),
            },
        )
        await until(lambda: accepted_key not in cluster.annotations("canary"))
        await until(lambda: refused_key in cluster.record("canary"))
        assert refused_key in cluster.annotations("canary")  # a refused request stays, recorded
        migrations = {call["input"]["uuid"]: call["input"] for call in await cluster.calls("canary", "migrate")}
        assert migrations["22222222-bbbb"]["component"] == "engine"
        refusals = [e.message for e in cluster.events("AnnotationRefused", "canary")]
        assert any(message.startswith("migration request: component 'bogus'") for message in refusals)
        await settled(controller)

    async with cluster.controller() as restarted:
        await settled(restarted)
    names = [call["name"] for call in await cluster.calls("canary")]
    assert names == ["apply", "promote", "promote", "rollback", "repin", "migrate", "migrate"]


async def test_a_refused_spec_is_a_warning_event_once_and_a_fixed_one_is_applied(cluster: Cluster) -> None:
    async with cluster.controller() as controller:
        cluster.create("bad", labels={REFUSE_LABEL: "yes"})
        events = await until(lambda: cluster.events("SpecRejected", "bad"))
        assert events[0].type == "Warning"
        assert events[0].message == ADMISSION_MESSAGE
        await settled(controller)
        assert cluster.events("SpecRejected", "bad")[0].count == 1
        assert await cluster.calls("bad", "apply") == []
        cluster.patch("bad", {"metadata": {"labels": {REFUSE_LABEL: None}}})
        await until(lambda: cluster.calls("bad", "apply"))


async def test_kubectl_delete_signals_the_workflow_or_releases_an_orphans_finalizer(cluster: Cluster) -> None:
    # Created and deleted while no controller ran, and no workflow runs for it.
    cluster.create("orphan", finalizers=[ISVC_FINALIZER])
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, cluster.namespace, "inferenceservices", "orphan")
    assert cluster.get("orphan") is not None
    async with cluster.controller():
        await until(lambda: cluster.get("orphan") is None)
        assert await cluster.calls("orphan") == []

        cluster.create("served", finalizers=[ISVC_FINALIZER])
        await until(lambda: cluster.calls("served", "apply"))
        cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, cluster.namespace, "inferenceservices", "served")
        handle = cluster.client.get_workflow_handle(isvc_workflow_id(cluster.namespace, "served"))
        calls = await asyncio.wait_for(handle.result(), WAIT_SECONDS)
        assert [call["name"] for call in calls] == ["apply", "delete"]
        assert calls[1]["input"] == {"uid": cluster.get("served")["metadata"]["uid"]}
        # The workflow would remove its finalizer once it has torn everything down.
        cluster.patch("served", {"metadata": {"finalizers": None}})
        await until(lambda: cluster.get("served") is None)

        # Deleted without the finalizer (the workflow never wrote the object): `delete` still goes.
        plain = cluster.create("plain")
        await until(lambda: cluster.calls("plain", "apply"))
        cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, cluster.namespace, "inferenceservices", "plain")
        handle = cluster.client.get_workflow_handle(isvc_workflow_id(cluster.namespace, "plain"))
        calls = await asyncio.wait_for(handle.result(), WAIT_SECONDS)
        assert [call["name"] for call in calls] == ["apply", "delete"]
        assert calls[1]["input"] == {"uid": plain["metadata"]["uid"]}


async def test_an_object_whose_workflow_removed_the_finalizer_sends_no_delete_to_a_new_run(cluster: Cluster) -> None:
    """The workflow tore the object down itself (a `delete` through the `temporal` CLI) and
    removed its finalizer; meanwhile a new run of the same name started. The object's DELETED
    event must not reach the new run."""
    async with cluster.controller() as controller:
        cluster.create("chat", finalizers=[ISVC_FINALIZER])
        await until(lambda: cluster.calls("chat", "apply"))
        handle = cluster.client.get_workflow_handle(isvc_workflow_id(cluster.namespace, "chat"))
        await handle.signal("delete")
        await asyncio.wait_for(handle.result(), WAIT_SECONDS)
        await settled(controller)
        # A new run for the name (a `temporal` apply), then the old run's last writes.
        await cluster.client.start_workflow(
            "InferenceService", {"manifest": {}}, id=handle.id, task_queue=cluster.task_queue
        )
        cluster.patch("chat", {"metadata": {"finalizers": None}})
        cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, cluster.namespace, "inferenceservices", "chat")
        await until(lambda: cluster.get("chat") is None)
        await settled(controller)
    described = await cluster.client.get_workflow_handle(handle.id).describe()
    assert described.status == WorkflowExecutionStatus.RUNNING
    assert await cluster.calls("chat") == []


async def test_inferencereplica_annotations_reach_their_inferenceservice(cluster: Cluster) -> None:
    labels = {"ome.io/inferenceservice": "chat", "ome.io/component": "engine"}
    async with cluster.controller() as controller:
        cluster.create("chat")
        await until(lambda: cluster.calls("chat", "apply"))
        cluster.create(
            "chat-engine",
            "inferencereplicas",
            spec={},
            labels=labels,
            annotations={"ome.io/release-held-revision": "chat-engine-abc", "ome.io/reset-instances": "all"},
        )
        await until(lambda: not cluster.annotations("chat-engine", "inferencereplicas"))
        assert [(c["name"], c["input"]) for c in await cluster.calls("chat")][1:] == [
            ("release_held", {"component": "engine", "revision": "chat-engine-abc"}),
            ("reset_instances", {"component": "engine", "instances": "all"}),
        ]
        # An InferenceReplica of an InferenceService whose workflow does not exist fails softly.
        cluster.create(
            "ghost-engine",
            "inferencereplicas",
            spec={},
            labels={**labels, "ome.io/inferenceservice": "ghost"},
            annotations={"ome.io/reset-instances": "0"},
        )
        events = await until(lambda: cluster.events("AnnotationRefused", "ghost-engine"))
        assert "does not exist" in events[0].message
        await settled(controller)
        assert len(await cluster.calls("chat")) == 3


async def test_the_state_gauges_follow_the_inferencereplicas_the_controller_watches(cluster: Cluster) -> None:
    """`/metrics` of the controller: rendered from its InferenceReplica and TrafficMap cache at
    scrape time, so a status write shows at the next scrape and a deleted object's series are
    gone (whichever worker ran the workflow that wrote it); a standby (not holding the Lease)
    serves the families without samples."""
    mine = {"namespace": cluster.namespace, "isvc": "chat", "component": "engine"}
    address = f"127.0.0.1:{free_port()}"
    leading = [True]
    async with cluster.controller() as controller:
        server = StateMetricsServer(address, controller.replicas, controller.trafficmaps, lambda: leading[0])
        await server.start()
        try:
            cluster.create("chat-engine", "inferencereplicas", spec={"inferenceService": "chat", "component": "engine"})
            home = {"cluster": "east", "capacity": {"source": "Endpoint"}}
            fallback = {"cluster": "west", "capacity": {"source": "ControlPlane", "fallbackReason": "no capacity report yet"}}
            cluster.create("chat", "trafficmaps", spec={"service": "chat", "entries": [home, fallback]})
            status = {
                "instanceStatuses": [
                    {"index": 0, "phase": "Ready"}, {"index": 1, "phase": "Failed"},
                    {"index": 2, "phase": "Deleting", "pods": {"total": 2}}, {"index": 3, "phase": "Deleting"},
                ],
                "rolloutHold": {"gate": "Budget", "reason": "r", "since": "2026-01-01T11:00:00Z"},
                "conditions": [
                    {"type": "InstanceReadyTimeoutUnconfigured", "status": "False",
                     "reason": "InstanceReadyTimeoutConfigured", "message": "Instance readiness deadline is 45m0s"},
                ],
            }  # fmt: skip
            cluster.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, cluster.namespace, "inferencereplicas", "chat-engine", {"status": status}
            )

            async def shown(name: str, **labels: str) -> list[float]:
                return [s.value for s in await scrape_samples(address) if s.name == name and s.has(**mine, **labels)]

            await until(lambda: shown("ome_instances", phase="Failed"), seconds=WAIT_SECONDS)
            assert await shown("ome_instances", phase="Failed") == [1]
            assert await shown("ome_instances", phase="Ready") == [1]
            assert await shown("ome_instances", phase="Creating") == [0]
            assert await shown("ome_instance_drains_overdue") == [0]
            since = 1767265200  # 2026-01-01T11:00:00Z
            assert await shown("ome_rollout_hold_since_timestamp_seconds", gate="Budget") == [since]
            assert await shown("ome_rollout_hold_since_timestamp_seconds", gate="Ratio") == [0]
            assert await shown("ome_rollout_hold_deadline_timestamp_seconds", gate="Budget") == [since + 2700]
            # §14: Instance 2's two pods, and 1 for Instance 3 whose only cleanup remains.
            assert await shown("ome_omenative_scale_down_active_pods") == [3]
            fallback_homes = [
                s.value for s in await scrape_samples(address)
                if s.name == "ome_trafficmap_capacity_fallback_homes" and s.has(namespace=cluster.namespace, trafficmap="chat")
            ]  # fmt: skip
            assert fallback_homes == [1], "§18: the home on control-plane capacity"

            leading[0] = False  # a standby: sums over both controllers count each Instance once
            assert not await scrape_samples(address)
            text = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read())
            assert b"# TYPE ome_instances gauge" in text
            leading[0] = True

            cluster.custom.delete_namespaced_custom_object(
                GROUP, VERSION, cluster.namespace, "inferencereplicas", "chat-engine"
            )
            cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, cluster.namespace, "trafficmaps", "chat")

            async def gone() -> bool:
                return not [s for s in await scrape_samples(address) if s.has(namespace=cluster.namespace)]

            await until(gone)
        finally:
            await server.stop()


async def test_a_runtime_change_reaches_the_services_it_serves(cluster: Cluster) -> None:
    cluster.create("rt", "servingruntimes", spec={"supportedModelFormats": []})
    cluster.custom.create_cluster_custom_object(
        GROUP, VERSION, "clusterservingruntimes",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterServingRuntime", "metadata": {"name": "shared"},
         "spec": {"supportedModelFormats": []}},
    )
    cluster.create("uses-rt", spec={"model": {"name": "m"}, "runtime": {"name": "rt"}})
    cluster.create("uses-shared", spec={"model": {"name": "m"}, "runtime": {"name": "shared"}})
    cluster.create("uses-other", spec={"model": {"name": "m"}, "runtime": {"name": "other"}})
    async with cluster.controller() as controller:
        for name in ("uses-rt", "uses-shared", "uses-other"):
            await until(lambda name=name: cluster.calls(name, "apply"))
        await settled(controller)
        assert not await cluster.calls("uses-rt", "runtime_changed")  # not for the initial list

        cluster.patch("rt", {"spec": {"supportedModelFormats": [{"name": "safetensors"}]}}, "servingruntimes")
        await until(lambda: cluster.calls("uses-rt", "runtime_changed"))
        cluster.custom.patch_cluster_custom_object(
            GROUP, VERSION, "clusterservingruntimes", "shared", {"metadata": {"labels": {"team": "a"}}}
        )
        cluster.custom.patch_cluster_custom_object(
            GROUP, VERSION, "clusterservingruntimes", "shared", {"spec": {"supportedModelFormats": [{"name": "gguf"}]}}
        )
        await until(lambda: cluster.calls("uses-shared", "runtime_changed"))
        await settled(controller)
    assert await cluster.count("uses-rt", "runtime_changed") == 1
    assert await cluster.count("uses-shared", "runtime_changed") == 1
    assert await cluster.count("uses-other", "runtime_changed") == 0


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
