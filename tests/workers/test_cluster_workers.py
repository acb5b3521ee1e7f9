"""Per-cluster pieces of the worker and the watcher (reference §16): a workflow started on
`ome-lifecycle@worker-a` acts on worker-a's API, and worker-a's watchers signal `@worker-a`
workflow IDs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from uuid import uuid4

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.fixtures.workload import Workload, eventually, register
from tests.workers.cluster_workflows import ApplyConfigMapWorkflow
from workers.config import KubeSettings, Settings, TemporalSettings
from workers.feature_config import ClustersSettings
from workers.watcher import cluster_watchers
from workers.worker import _poll_until_stopped
from workflows.names import cluster_task_queue


def settings_for(sim: KubeSim, task_queue: str) -> Settings:
    return Settings(
        temporal=TemporalSettings(task_queue=task_queue),
        kube=KubeSettings(kubeconfig=sim.kubeconfig_path),
        clusters=ClustersSettings(refresh_interval="0.2s"),
    )


@asynccontextmanager
async def running_worker(client: Client, settings: Settings, control_plane: Any) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        _poll_until_stopped(client, settings, control_plane, stop, [ApplyConfigMapWorkflow], None)
    )
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)


def config_map_exists(api_client: Any, name: str) -> bool:
    try:
        kubernetes.client.CoreV1Api(api_client).read_namespaced_config_map(name, "default")
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


async def test_a_workflow_on_the_cluster_queue_acts_on_that_cluster(
    dev_client: Client, kubesim: KubeSim, workload: Workload, task_queue: str
) -> None:
    control_plane = kubesim.api_client()
    register(control_plane, "worker-a", workload.front.kubeconfig_text())
    async with running_worker(dev_client, settings_for(kubesim, task_queue), control_plane):
        action = await dev_client.execute_workflow(
            "TestApplyConfigMap",
            "landed-in-worker-a",
            id=f"test-{uuid4()}",
            task_queue=cluster_task_queue(task_queue, "worker-a"),
            execution_timeout=timedelta(seconds=60),
        )
        assert action == "created"
        assert config_map_exists(workload.sim.api_client(), "landed-in-worker-a")
        assert not config_map_exists(control_plane, "landed-in-worker-a")
        # The main queue still acts on the control plane.
        await dev_client.execute_workflow(
            "TestApplyConfigMap", "on-the-control-plane", id=f"test-{uuid4()}", task_queue=task_queue
        )
        assert config_map_exists(control_plane, "on-the-control-plane")
        assert not config_map_exists(workload.sim.api_client(), "on-the-control-plane")


async def test_the_main_worker_runs_without_the_workload_cluster_crd(dev_client: Client, task_queue: str) -> None:
    with KubeSim(topology="zones=1,nodes-per-zone=1,gpus=8", crds=None) as bare:
        async with running_worker(dev_client, settings_for(bare, task_queue), bare.api_client()):
            await dev_client.execute_workflow(
                "TestApplyConfigMap", "no-clusters", id=f"test-{uuid4()}", task_queue=task_queue
            )
        assert config_map_exists(bare.api_client(), "no-clusters")


async def test_a_workload_clusters_watchers_signal_its_home_workflows(workload: Workload) -> None:
    signalled: list[str] = []

    async def sink(workflow_id: str, _: Any) -> bool:
        signalled.append(workflow_id)
        return True

    watchers = cluster_watchers(sink, sink)
    client = workload.sim.api_client()
    await watchers.reconcile({"worker-a": client})
    try:
        labels = {"ome.io/inferenceservice": "svc", "ome.io/component": "engine", "ome.io/instance-index": "0"}
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": "svc-engine-0-default-0", "labels": labels},
                "spec": {"containers": [{"name": "engine", "image": "engine:1"}]},
            },
        )
        kubernetes.client.AppsV1Api(client).create_namespaced_deployment(
            "default",
            {
                "metadata": {"name": "svc-router", "labels": {**labels, "ome.io/component": "router"}},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "svc-router"}},
                    "template": {
                        "metadata": {"labels": {"app": "svc-router"}},
                        "spec": {"containers": [{"name": "router", "image": "router:1"}]},
                    },
                },
            },
        )
        await eventually(lambda: "instance/default/svc-engine-0@worker-a" in signalled)
        await eventually(lambda: "isvc/default/svc@worker-a" in signalled)
        assert all(workflow_id.endswith("@worker-a") for workflow_id in signalled)
        # The cluster goes: its watchers stop.
        await watchers.reconcile({})
        assert watchers.running == {}
    finally:
        await watchers.stop_all()


