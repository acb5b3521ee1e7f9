"""The `Drain` workflow with the real Kubernetes activities against kubesim, on the
time-skipping server, with a TEST DOUBLE of the `Migration` workflow (`drain_doubles.py`:
it deletes the source Instance's pods, fails or holds on the test's word).

kubesim runs in real time; the drain looks at the node again on timers (5 s while pods
leave): `until` alternates a few skipped seconds with a moment of real time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from uuid import uuid4

import kubernetes
import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.registry import build_activities
from kubesim.handle import KubeSim
from models.kube_ops import KUBE_EVICT_POD, EvictPodInput, EvictPodResult
from planning.drain import texts
from planning.drain.texts import DrainPhase
from tests.workflows.drain_doubles import EVENT_REASON, SCRIPT, MigrationDouble
from workers.worker import build_worker
from workflows.drain.messages import SIGNAL_CANCEL, SIGNAL_RELEASE, DrainInput, DrainStatus
from workflows.names import DRAIN, drain_workflow_id

pytestmark = [pytest.mark.workflows, pytest.mark.kubesim]

NODE = "gpu-node-1"
OTHER_NODE = "gpu-node-2"
Handle = WorkflowHandle[Any, DrainStatus]


def product_pod(name: str, isvc: str, component: str, index: int | None, node: str = NODE) -> dict[str, Any]:
    labels = {"ome.io/inferenceservice": isvc, "ome.io/component": component}
    if index is not None:
        labels["ome.io/instance-index"] = str(index)
    return plain_pod(name, labels, node)


def plain_pod(name: str, labels: dict[str, str], node: str = NODE) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "app:1"}],
            "terminationGracePeriodSeconds": 1,
        },
    }


class DrainHarness:
    def __init__(self, env: WorkflowEnvironment, sim: KubeSim, task_queue: str) -> None:
        self.env = env
        self.sim = sim
        self.task_queue = task_queue
        self.core = kubernetes.client.CoreV1Api(sim.api_client())
        self.policy = kubernetes.client.PolicyV1Api(sim.api_client())

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid4().hex[:6]}"
        self.core.create_namespace({"metadata": {"name": name}})
        return name

    def pods(self, namespace: str, *manifests: dict[str, Any]) -> None:
        for manifest in manifests:
            self.core.create_namespaced_pod(namespace, manifest)

    def script(self, namespace: str, orders: dict[str, str]) -> None:
        body = {"metadata": {"name": SCRIPT}, "data": orders}
        try:
            self.core.replace_namespaced_config_map(SCRIPT, namespace, body)
        except kubernetes.client.ApiException:
            self.core.create_namespaced_config_map(namespace, body)

    def unschedulable(self, node: str = NODE) -> bool:
        return bool(self.core.read_node(node).spec.unschedulable)

    def live_pods(self, namespace: str) -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in self.sim.objects("", "pods", namespace)
            if not p["metadata"].get("deletionTimestamp")
        )

    def migrations(self, namespace: str) -> list[dict[str, Any]]:
        return [
            json.loads(e["message"]) for e in self.sim.objects("", "events", namespace) if e["reason"] == EVENT_REASON
        ]

    async def start(self, node: str = NODE, **fields: Any) -> Handle:
        return await self.env.client.start_workflow(
            DRAIN,
            DrainInput(node=node, **fields),
            id=drain_workflow_id(node),
            task_queue=self.task_queue,
            result_type=DrainStatus,
        )

    async def until(
        self, handle: Handle, test: Callable[[DrainStatus], bool], step: float = 5.0, within: float = 60.0
    ) -> DrainStatus:
        deadline = time.monotonic() + within
        status = await handle.query("status", result_type=DrainStatus)
        while not test(status):
            if time.monotonic() > deadline:
                raise AssertionError(f"not reached within {within:.0f}s; last status: {status}")
            await self.env.sleep(step)
            await asyncio.sleep(0.2)
            status = await handle.query("status", result_type=DrainStatus)
        return status


@pytest_asyncio.fixture(loop_scope="session")
async def harness(workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str) -> AsyncIterator[DrainHarness]:
    async with build_worker(
        workflow_env.client, task_queue, kubesim.api_client(), extra_workflows=[MigrationDouble]
    ):
        yield DrainHarness(workflow_env, kubesim, task_queue)


async def test_drains_instances_of_several_services_then_holds_until_release(harness: DrainHarness) -> None:
    prod, docs_ns = harness.namespace("prod"), harness.namespace("docs")
    harness.pods(
        prod,
        product_pod("chat-engine-0-leader-0", "chat", "engine", 0),
        product_pod("chat-engine-0-worker-0", "chat", "engine", 0),
        product_pod("chat-engine-1-default-0", "chat", "engine", 1),
        product_pod("chat-router-7d9f", "chat", "router", None),
        product_pod("chat-engine-2-default-0", "chat", "engine", 2, node=OTHER_NODE),
        plain_pod("sidecar-cache", {"app": "cache"}),
    )
    harness.pods(docs_ns, product_pod("docs-decoder-0-default-0", "docs", "decoder", 0))

    handle = await harness.start(reason="kernel upgrade")
    status = await harness.until(handle, lambda s: s.phase == DrainPhase.DRAINED)

    assert harness.unschedulable()
    assert status.instances_moved == [
        f"{docs_ns}/docs-decoder-0 -> 100",
        f"{prod}/chat-engine-0 -> 100",
        f"{prod}/chat-engine-1 -> 101",
    ]
    assert status.migrations_started == 3 and status.pods_left == [] and status.waiting == []
    assert status.pods_evicted == [f"{prod}/chat-router-7d9f"]
    assert status.pods_ignored == [f"{prod}/sidecar-cache"]
    assert "signal release" in status.message
    # Not on the node: untouched. Not the product's: left alone.
    assert harness.live_pods(prod) == ["chat-engine-2-default-0", "sidecar-cache"]
    requests = sorted(harness.migrations(prod) + harness.migrations(docs_ns), key=lambda r: r["workflow_id"])
    assert [r["workflow_id"].rsplit("/", 1)[0] for r in requests] == [
        f"migration/{docs_ns}/docs-decoder-0", f"migration/{prod}/chat-engine-0", f"migration/{prod}/chat-engine-1"
    ]
    for request in requests:
        assert request["workflow_id"].endswith("/" + request["uuid"])
        assert request["from_node"] == NODE and request["reason"] == "kernel upgrade"
        assert request["requested_by"] == f"drain/node/{NODE}"

    # Held cordoned until released, however long that takes.
    await harness.env.sleep(3 * 3600)
    await asyncio.sleep(0.3)
    assert (await handle.query("status", result_type=DrainStatus)).phase == DrainPhase.DRAINED
    assert harness.unschedulable()
    await handle.signal(SIGNAL_RELEASE)
    final = await handle.result()
    assert final.phase == DrainPhase.RELEASED and not final.cordoned
    assert not harness.unschedulable()


async def test_pdb_429_is_waited_out_until_the_budget_allows(harness: DrainHarness) -> None:
    prod = harness.namespace("prod")
    web = {"ome.io/inferenceservice": "web", "ome.io/component": "engine"}
    harness.pods(prod, plain_pod("web-0", web))
    harness.policy.create_namespaced_pod_disruption_budget(
        prod, {"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": web}}}
    )
    await asyncio.sleep(0.5)  # web-0 Ready: the budget allows no disruption

    handle = await harness.start()
    status = await harness.until(handle, lambda s: bool(s.waiting))
    [wait] = status.waiting
    assert wait.subject == f"pod {prod}/web-0"
    assert wait.why.startswith("blocked by PDB web: ") and wait.until is not None
    assert status.phase == DrainPhase.EVICTING and status.pods_left == [f"{prod}/web-0"]
    # Still blocked a while later: waited, never forced.
    await harness.env.sleep(120)
    await asyncio.sleep(0.3)
    assert harness.live_pods(prod) == ["web-0"]

    harness.pods(prod, plain_pod("web-1", web, node=OTHER_NODE))
    status = await harness.until(handle, lambda s: s.phase == DrainPhase.DRAINED)
    assert status.pods_evicted == [f"{prod}/web-0"] and status.waiting == []
    assert harness.live_pods(prod) == ["web-1"]
    await handle.signal(SIGNAL_RELEASE)
    assert (await handle.result()).phase == DrainPhase.RELEASED


async def test_failed_migration_is_retried_after_the_rate_window(harness: DrainHarness) -> None:
    prod = harness.namespace("prod")
    message = "migration rate cap reached (10/10 in the last 15m0s)"
    harness.script(prod, {"chat-engine-0": f"fail:RateLimited:{message}"})
    harness.pods(prod, product_pod("chat-engine-0-default-0", "chat", "engine", 0))

    handle = await harness.start()
    status = await harness.until(handle, lambda s: bool(s.waiting), step=1)
    [wait] = status.waiting
    assert wait.subject == f"Instance {prod}/chat-engine-0"
    assert wait.why == texts.migration_failed("RateLimited", message, texts.RETRY_AFTER_WINDOW)
    assert status.phase == DrainPhase.MIGRATING and status.migrations_started == 1

    harness.script(prod, {})
    status = await harness.until(handle, lambda s: s.phase == DrainPhase.DRAINED, step=300)
    assert status.migrations_started == 2
    assert status.instances_moved == [f"{prod}/chat-engine-0 -> 100"]
    await handle.signal(SIGNAL_CANCEL)
    final = await handle.result()
    assert final.phase == DrainPhase.CANCELLED and not harness.unschedulable()


async def test_cancel_stops_moving_and_uncordons(harness: DrainHarness) -> None:
    prod = harness.namespace("prod")
    harness.script(prod, {"chat-engine-0": "hold"})
    harness.pods(
        prod,
        product_pod("chat-engine-0-default-0", "chat", "engine", 0),
        product_pod("chat-engine-1-default-0", "chat", "engine", 1),
    )
    handle = await harness.start()
    status = await harness.until(handle, lambda s: bool(s.instances_migrating), step=1)
    assert status.instances_migrating == [f"{prod}/chat-engine-0"]
    assert [w.why for w in status.waiting] == [texts.queued_behind(f"{prod}/chat-engine-0")]
    assert harness.unschedulable()

    await handle.signal(SIGNAL_CANCEL)
    final = await handle.result()
    assert final.phase == DrainPhase.CANCELLED and not final.cordoned
    assert final.migrations_started == 1 and final.instances_migrating == []
    assert not harness.unschedulable()
    # Nothing more moved: both Instances are still where they were.
    assert harness.live_pods(prod) == ["chat-engine-0-default-0", "chat-engine-1-default-0"]


async def test_timeout_stops_moving_and_holds_the_node_cordoned(harness: DrainHarness) -> None:
    prod = harness.namespace("prod")
    harness.script(prod, {"chat-engine-0": "hold"})
    harness.pods(prod, product_pod("chat-engine-0-default-0", "chat", "engine", 0))
    handle = await harness.start(timeout="10m")
    await harness.until(handle, lambda s: bool(s.instances_migrating), step=1)

    status = await harness.until(handle, lambda s: s.phase == DrainPhase.TIMED_OUT, step=120)
    assert status.instances_migrating == [] and status.pods_left == [f"{prod}/chat-engine-0-default-0"]
    assert "timed out after 10m" in status.message
    assert harness.unschedulable()
    await handle.signal(SIGNAL_RELEASE)
    final = await handle.result()
    assert final.phase == DrainPhase.RELEASED and not harness.unschedulable()


async def test_node_failing_mid_way_still_drains(harness: DrainHarness) -> None:
    prod = harness.namespace("prod")
    harness.script(prod, {"chat-engine-0": "hold"})
    harness.pods(
        prod,
        product_pod("chat-engine-0-default-0", "chat", "engine", 0),
        product_pod("chat-router-1", "chat", "router", None),
    )
    handle = await harness.start()
    await harness.until(handle, lambda s: bool(s.instances_migrating), step=1)
    harness.sim.fail_node(NODE)
    # The migration in flight ends Failed (the double is cancelled from outside); the drain
    # starts another after its back-off, which moves the Instance.
    harness.script(prod, {})
    [first] = harness.migrations(prod)
    await harness.env.client.get_workflow_handle(first["workflow_id"]).signal("cancel")
    status = await harness.until(handle, lambda s: s.phase == DrainPhase.DRAINED, step=15)
    assert status.migrations_started == 2
    assert status.instances_moved == [f"{prod}/chat-engine-0 -> 100"]
    # The failed node's kubelet never confirms the ends: the pods stay Terminating there,
    # serve nothing, and are reported rather than waited for.
    assert status.pods_stuck == status.pods_left and f"{prod}/chat-engine-0-default-0" in status.pods_stuck
    assert set(status.pods_left) <= {f"{prod}/chat-engine-0-default-0", f"{prod}/chat-router-1"}
    assert harness.live_pods(prod) == []
    await handle.signal(SIGNAL_RELEASE)
    assert (await handle.result()).phase == DrainPhase.RELEASED


@pytest.mark.parametrize(
    ("node", "drain_timeout", "error_type", "fragment"),
    [
        pytest.param("", None, texts.INVALID_INPUT, "node must name the node to drain, got ''", id="empty-node"),
        pytest.param(NODE, "soon", texts.INVALID_INPUT, "timeout 'soon' is not a duration", id="bad-timeout"),
        pytest.param("gpu-node-99", None, texts.NODE_NOT_FOUND, "node 'gpu-node-99' not found", id="no-such-node"),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_cordoned(
    harness: DrainHarness, node: str, drain_timeout: str | None, error_type: str, fragment: str
) -> None:
    handle = await harness.start(node=node, timeout=drain_timeout)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == error_type and cause.non_retryable
    assert fragment in cause.message
    assert not any(n.spec.unschedulable for n in harness.core.list_node().items)


async def test_release_before_drained_stops_moving_lets_the_migration_finish_and_uncordons(
    harness: DrainHarness,
) -> None:
    prod = harness.namespace("prod")
    harness.script(prod, {"chat-engine-0": "after:120"})
    harness.pods(
        prod,
        product_pod("chat-engine-0-default-0", "chat", "engine", 0),
        product_pod("chat-engine-1-default-0", "chat", "engine", 1),
    )
    handle = await harness.start()
    await harness.until(handle, lambda s: bool(s.instances_migrating), step=1)

    await handle.signal(SIGNAL_RELEASE)
    status = await harness.until(handle, lambda s: s.message.startswith(texts.RELEASING), step=0.1)
    assert status.instances_migrating == [f"{prod}/chat-engine-0"]
    assert harness.unschedulable(), "cordoned until the migration in flight has finished"

    final = await handle.result()
    assert final.phase == DrainPhase.RELEASED and not final.cordoned
    assert not harness.unschedulable()
    # The migration in flight finished (its pods went); nothing new started for Instance 1.
    assert final.migrations_started == 1 and final.instances_migrating == []
    assert [m["workflow_id"] for m in harness.migrations(prod)] and len(harness.migrations(prod)) == 1
    assert harness.live_pods(prod) == ["chat-engine-1-default-0"]


async def test_a_refused_eviction_waits_with_the_error_and_is_retried(
    workflow_env: WorkflowEnvironment, kubesim: KubeSim, task_queue: str
) -> None:
    real = build_activities(kubesim.api_client(), None, None)
    real_evict = next(fn for fn in real if _activity_name(fn) == KUBE_EVICT_POD)
    forbidden = {"web-0"}

    @activity.defn(name=KUBE_EVICT_POD)
    def evict_pod(request: EvictPodInput) -> EvictPodResult:
        if request.name in forbidden:
            raise ApplicationError(
                f'evict pod {request.namespace}/{request.name}: pods "{request.name}" is forbidden: '
                "admission webhook denied the request",
                type="Forbidden",
                non_retryable=True,
            )
        result: EvictPodResult = real_evict(request)
        return result

    activities = [fn for fn in real if _activity_name(fn) != KUBE_EVICT_POD] + [evict_pod]
    async with build_worker(
        workflow_env.client, task_queue, kubesim.api_client(), extra_workflows=[MigrationDouble], activities=activities
    ):
        harness = DrainHarness(workflow_env, kubesim, task_queue)
        prod = harness.namespace("prod")
        harness.pods(prod, plain_pod("web-0", {"ome.io/inferenceservice": "web", "ome.io/component": "engine"}))
        await asyncio.sleep(0.3)
        handle = await harness.start()
        status = await harness.until(handle, lambda s: bool(s.waiting), step=1)
        [wait] = status.waiting
        assert wait.subject == f"pod {prod}/web-0" and wait.until is not None
        assert wait.why.startswith("eviction failed (") and "forbidden" in wait.why, wait.why
        assert status.phase == DrainPhase.EVICTING and harness.unschedulable()
        # Still waiting a while later; the drain did not fail.
        await harness.env.sleep(120)
        await asyncio.sleep(0.3)
        status = await handle.query("status", result_type=DrainStatus)
        assert status.phase == DrainPhase.EVICTING and [w.subject for w in status.waiting] == [f"pod {prod}/web-0"]

        forbidden.clear()  # someone fixed what refused it
        status = await harness.until(handle, lambda s: s.phase == DrainPhase.DRAINED, step=60)
        assert status.pods_evicted == [f"{prod}/web-0"] and status.waiting == []
        await handle.signal(SIGNAL_RELEASE)
        assert (await handle.result()).phase == DrainPhase.RELEASED
        assert not harness.unschedulable()


def _activity_name(fn: Any) -> str | None:
    definition = getattr(fn, "__temporal_activity_definition", None)
    return getattr(definition, "name", None)
