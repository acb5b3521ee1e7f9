"""Chaos: the leading controller and the leading watcher SIGKILLed during a 200-Instance update.

Two watchers and two controllers run as their own processes (`python -m workers.watcher`,
`python -m workers.controller`) beside one worker, against kubesim with instant readiness; each
pair elects a leader with its `coordination.k8s.io/v1` Lease (`workers.leader`). The
InferenceService is created and edited with the Kubernetes API, as `kubectl apply` would, so the
controller relays it.

1. After bring-up, the leading controller is killed and the image edit is written at once:
   the standby must take the Lease `ome-controller` within 15 s and relay the edit exactly once
   (the workflow's `applied` generation is 2: the create and the edit).
2. Once the update is under way (new pods exist), the leading watcher is killed: the standby
   must take the Lease `ome-watcher` within 15 s, and the update must end with every Instance
   on the new revision and serving, as the Instance workflows themselves report.
3. No signal lost or doubled: the end state shows none lost (every Instance saw its new pod
   serving), and an Instance's history has a `pods_changed` signal saying the same as the one
   before it only where the design allows it (`workers.watch.pods`): the old leader sent the
   first after its delivered mark (what it sent after its last renewal, up to one renew
   deadline's worth, is sent again by the new leader), and at most once per Instance.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import kubernetes.client
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from bench.lifecycle_stack import (
    IMAGE_1,
    IMAGE_2,
    ProductProcess,
    instant_kubesim,
    isvc_manifest,
    observe_pods,
    prepare_namespace,
    topology_for,
    worker_process,
)
from kubesim.handle import KubeSim
from models.instance import SIGNAL_PODS_CHANGED, InstanceStatus
from models.pods import InstancePods
from workers.leader import CONTROLLER_LEASE, WATCHER_LEASE
from workflows.names import instance_workflow_id, isvc_workflow_id
from workflows.service.messages import AppliedView

pytestmark = pytest.mark.e2e

INSTANCES = 200
NAME = "ha"
TAKEOVER_WITHIN = 15.0
BRING_UP_WITHIN = 400.0
UPDATE_WITHIN = 400.0
STATUS_AGREES_WITHIN = 60.0


@pytest.fixture
def cluster() -> Iterator[KubeSim]:
    """kubesim with room for every Instance and its surge pod, and instant readiness."""
    with contextlib.ExitStack() as cleanup:
        sim = instant_kubesim(topology_for(INSTANCES * 2))
        cleanup.callback(sim.stop)
        yield sim


def pair(module: str, identity_prefix: str, address: str, task_queue: str, sim: KubeSim, tmp_path: Path) -> dict[str, ProductProcess]:
    """Two processes of `module`, named by the holderIdentity each writes into its Lease."""
    return {
        identity: ProductProcess(
            module,
            address=address,
            task_queue=task_queue,
            kubeconfig=str(sim.kubeconfig_path),
            log=tmp_path / f"{identity}.log",
            ready_pattern=r"(watcher|controller) starting",
            env_extra={"OME_LEADER__IDENTITY": identity},
        )
        for identity in (f"{identity_prefix}-a", f"{identity_prefix}-b")
    }


def holder(sim: KubeSim, lease: str) -> str | None:
    api = sim.api_client()
    try:
        record = kubernetes.client.CoordinationV1Api(api).read_namespaced_lease(lease, "default")
        return record.spec.holder_identity
    except kubernetes.client.exceptions.ApiException:
        return None
    finally:
        api.close()


async def wait_for_holder(sim: KubeSim, lease: str, among: set[str], within: float) -> tuple[str, float]:
    started = time.monotonic()
    while time.monotonic() - started < within:
        who = await asyncio.to_thread(holder, sim, lease)
        if who in among:
            return who, time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError(f"nobody of {sorted(among)} took the Lease {lease} within {within:.0f} s")


def custom(sim: KubeSim) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(sim.api_client())


async def wait_settled(sim: KubeSim, namespace: str, image: str, within: float, logs: list[ProductProcess]) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if (await asyncio.to_thread(observe_pods, sim, namespace, NAME)).settled_on(image, INSTANCES):
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    tails = "\n".join(f"--- {p.log.name}\n{p.tail(2000)}" for p in logs)
    raise AssertionError(f"{INSTANCES} Instances did not settle on {image} within {within:.0f} s\n{tails}")


async def statuses_agree(client: Client, namespace: str) -> None:
    """Every Instance workflow reports its new revision running and serving."""

    async def status(index: int) -> InstanceStatus:
        handle = client.get_workflow_handle(instance_workflow_id(namespace, NAME, "engine", index))
        answer: InstanceStatus = await handle.query("status", result_type=InstanceStatus)
        return answer

    deadline = time.monotonic() + STATUS_AGREES_WITHIN
    while True:
        statuses = await asyncio.gather(*(status(index) for index in range(INSTANCES)))
        behind = [s.index for s in statuses if s.running_revision != s.target_revision or not s.serving]
        if not behind and len({s.target_revision for s in statuses}) == 1:
            return
        assert time.monotonic() < deadline, f"Instances not on their new revision and serving: {behind[:10]}"
        await asyncio.sleep(1.0)


async def repeated_observations(client: Client, namespace: str) -> tuple[int, dict[int, list[InstancePods]]]:
    """(`pods_changed` signals in all, per Instance index the summaries the next one repeated)."""
    slots = asyncio.Semaphore(16)

    async def signals(index: int) -> list[InstancePods]:
        async with slots:
            history = await client.get_workflow_handle(
                instance_workflow_id(namespace, NAME, "engine", index)
            ).fetch_history()
        found = []
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                continue
            attributes = event.workflow_execution_signaled_event_attributes
            if attributes.signal_name == SIGNAL_PODS_CHANGED:
                found.append(InstancePods.model_validate(json.loads(attributes.input.payloads[0].data)))
        return found

    per_instance = await asyncio.gather(*(signals(index) for index in range(INSTANCES)))
    repeats = {}
    for index, received in enumerate(per_instance):
        repeated = [before for before, after in zip(received, received[1:], strict=False) if after.same_state(before)]
        if repeated:
            repeats[index] = repeated
    return sum(len(received) for received in per_instance), repeats


def taken_over_mark(log: str) -> int:
    """The newest resourceVersion of the delivered mark the new leader took over (its log)."""
    line = [line for line in log.splitlines() if "leading cluster= " in line][-1]
    mark = ast.literal_eval(line.split("mark=", 1)[1])
    return max((int(v) for v in mark.values()), default=0)


@pytest.mark.timeout(1200)
async def test_killing_the_leading_controller_and_watcher_during_an_update_hands_over_within_15_s(
    dev_server: WorkflowEnvironment, cluster: KubeSim, tmp_path: Path
) -> None:
    client = dev_server.client
    address = client.service_client.config.target_host
    task_queue = f"tq-{uuid4()}"
    namespace = f"ha-{uuid4().hex[:8]}"
    prepare_namespace(cluster, namespace)
    worker = worker_process(address, task_queue, cluster.kubeconfig_path, tmp_path / "worker.log")
    watchers = pair("workers.watcher", "watcher", address, task_queue, cluster, tmp_path)
    controllers = pair("workers.controller", "controller", address, task_queue, cluster, tmp_path)
    everyone = [worker, *watchers.values(), *controllers.values()]
    worker.start()
    for process in [*watchers.values(), *controllers.values()]:
        process.start()
    try:
        watcher_leader, _ = await wait_for_holder(cluster, WATCHER_LEASE, set(watchers), 30)
        controller_leader, _ = await wait_for_holder(cluster, CONTROLLER_LEASE, set(controllers), 30)

        manifest = isvc_manifest(namespace, NAME, INSTANCES, IMAGE_1)
        await asyncio.to_thread(
            custom(cluster).create_namespaced_custom_object, "ome.io", "v1beta1", namespace, "inferenceservices", manifest
        )
        bring_up = await wait_settled(cluster, namespace, IMAGE_1, BRING_UP_WITHIN, everyone)

        # 1. The leading controller dies; the edit is written while nobody relays.
        controllers[controller_leader].kill()
        killed_controller = time.monotonic()
        edited = copy.deepcopy(manifest)
        edited["spec"]["engine"]["runner"]["image"] = IMAGE_2
        await asyncio.to_thread(
            custom(cluster).patch_namespaced_custom_object,
            "ome.io", "v1beta1", namespace, "inferenceservices", NAME, {"spec": edited["spec"]},
        )
        new_controller, _ = await wait_for_holder(
            cluster, CONTROLLER_LEASE, set(controllers) - {controller_leader}, TAKEOVER_WITHIN + 5
        )
        controller_takeover = time.monotonic() - killed_controller

        # 2. Once new pods exist, the leading watcher dies mid-update.
        while not any(p.image == IMAGE_2 for p in (await asyncio.to_thread(observe_pods, cluster, namespace, NAME)).pods):
            assert time.monotonic() - killed_controller < 60, "the update never started"
            await asyncio.sleep(0.1)
        assert not (await asyncio.to_thread(observe_pods, cluster, namespace, NAME)).settled_on(IMAGE_2, INSTANCES)
        watchers[watcher_leader].kill()
        killed_watcher = time.monotonic()
        _, _ = await wait_for_holder(cluster, WATCHER_LEASE, set(watchers) - {watcher_leader}, TAKEOVER_WITHIN + 5)
        watcher_takeover = time.monotonic() - killed_watcher
        update = await wait_settled(cluster, namespace, IMAGE_2, UPDATE_WITHIN, everyone)

        assert controller_takeover <= TAKEOVER_WITHIN, f"controller takeover took {controller_takeover:.1f} s"
        assert watcher_takeover <= TAKEOVER_WITHIN, f"watcher takeover took {watcher_takeover:.1f} s"
        # Not lost: every Instance workflow saw its new pod serving and finished its update.
        await statuses_agree(client, namespace)
        # The edit was relayed once: the workflow accepted two specs, the create and the edit.
        view = await client.get_workflow_handle(isvc_workflow_id(namespace, NAME)).query(
            "applied", result_type=AppliedView
        )
        assert (view.generation, view.object_generation) == (2, 2), f"{view}: an edit applied twice or lost"
        # Not doubled: no Instance got a summary saying what the one before it said.
        # Not doubled beyond the design: a summary is repeated only when the old leader sent it
        # after its delivered mark (the new leader cannot know it arrived), once per Instance.
        signals, repeats = await repeated_observations(client, namespace)
        new_log = watchers[next(iter(set(watchers) - {watcher_leader}))].log.read_text()
        mark = taken_over_mark(new_log)
        before_mark = {i: [s.resource_version for s in sent if int(s.resource_version or 0) <= mark] for i, sent in repeats.items()}
        assert not any(before_mark.values()), f"summaries the old leader had delivered were repeated (mark {mark}): {before_mark}"
        assert all(len(sent) == 1 for sent in repeats.values()), f"repeated more than once: {repeats}"
        print(
            f"bring-up {bring_up:.1f} s; controller takeover {controller_takeover:.1f} s (by {new_controller}); "
            f"watcher takeover {watcher_takeover:.1f} s; update settled {update:.1f} s after the watcher kill "
            f"began waiting; {signals} pods_changed signals, {len(repeats)} Instances got one repeat (after the mark); "
            f"{[line for line in new_log.splitlines() if 'leading cluster=' in line]}"
        )
    finally:
        for process in everyone:
            process.kill()
