"""The InferenceService controller (`python -m workers.controller`) against kubesim and a real
Temporal dev server, with a stand-in InferenceService workflow
(`tests.workers.test_controller_workflow`) that records every message it receives: `kubectl
apply`, `annotate` and `delete` drive the workflow exactly once each, across restarts."""

from __future__ import annotations

import asyncio
import json
import urllib.request

from temporalio.client import WorkflowExecutionStatus

from planning.service.relay import ISVC_FINALIZER, RELAYED_ANNOTATION
from tests.fixtures.metrics_scrape import scrape_samples
from tests.fixtures.prometheus import free_port
from tests.workers.controller_cluster import (
    GROUP,
    PAUSED,
    VERSION,
    WAIT_SECONDS,
    Cluster,
    settled,
    until,
)
from tests.workers.test_controller_workflow import (
    ADMISSION_MESSAGE,
    REFUSE_LABEL,
)
from workers.control.metrics_server import StateMetricsServer
from workflows.names import isvc_workflow_id


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
