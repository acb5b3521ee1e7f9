"""An in-memory cluster whose activities run under the real Kubernetes activity names.

The Instance workflow's logic is tested fast and deterministically against it: pods start
(or fail to pull) the moment they are created, deletes finish at once, and every change is
signalled to the workflow as the watcher would. The kubesim tests check the same behaviour
against the real activities.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.workflow_signals import SignalActivities
from models.instance import SIGNAL_PODS_CHANGED
from models.kube_ops import (
    KUBE_APPLY_OBJECT,
    KUBE_CRD_EXISTS,
    KUBE_CREATE_PODS,
    KUBE_DELETE_OBJECT,
    KUBE_DELETE_PODS,
    KUBE_FORCE_DELETE_POD,
    KUBE_LIST_INSTANCE_PODS,
    KUBE_PATCH_OBJECT,
    KUBE_PODS_GONE,
    KUBE_READ_OBJECT,
    KUBE_RECORD_EVENT,
    KUBE_SET_SERVING,
    ApplyObjectInput,
    ApplyObjectResult,
    CrdExistsInput,
    CrdExistsResult,
    CreatedPod,
    CreatePodsInput,
    CreatePodsResult,
    DeleteObjectInput,
    DeleteObjectResult,
    DeletePodsInput,
    DeletePodsResult,
    ForceDeletePodInput,
    KubeErrorType,
    ListInstancePodsInput,
    ObjectRef,
    PatchObjectInput,
    PatchObjectResult,
    PodsGoneInput,
    PodsGoneResult,
    ReadObjectInput,
    ReadObjectResult,
    RecordEventInput,
    RecordEventResult,
    SetServingInput,
    SetServingResult,
)
from models.pods import ContainerSummary, InstancePods, PodSummary
from workflows.names import instance_workflow_id


@dataclass
class FakePod:
    manifest: dict[str, Any]
    uid: str
    image: str
    created_at: datetime
    phase: str = "Running"
    containers_ready: bool = True
    waiting: str | None = None
    serving: bool | None = None
    restart_count: int = 0
    node_ready: str = "True"

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.manifest["metadata"]["labels"]
        return labels


@dataclass
class FakeCluster:
    client: Client
    bad_images: set[str] = field(default_factory=set)
    crd: bool = True
    pods: dict[str, FakePod] = field(default_factory=dict)
    events: list[tuple[str, str]] = field(default_factory=list)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    serving_log: list[tuple[str, bool]] = field(default_factory=list)
    delete_calls: list[tuple[tuple[str, ...], bool]] = field(default_factory=list)
    """Each `kube.delete_pods` call: its pod names, and whether it took them out of rotation first."""
    on_change: Callable[[FakeCluster], None] | None = None
    lose_gone_signals: bool = False
    """Deleted pods vanish without the watcher's signal (a lost 'gone'): only a list sees it."""
    services_quota: int | None = None
    """The namespace's `services` quota, as the API server's admission holds creations to it: a
    new Service past it is refused (403 `exceeded quota`)."""
    gate_at_create: bool = False
    """A create that asks for it writes the pods' `ome.io/serving` gate True (`CreatePodsInput.serving`)
    as the real activity does; otherwise the fake leaves it for `set_serving`."""
    gate_news_delay: float | None = None
    """Seconds (wall clock) after a `set_serving` returns that the watcher's news of it comes, in a
    task of its own; None: the news is sent from inside the call, before it returns, so the two
    race in the worker (`test_instance_service_quota`'s replay test)."""
    uids: itertools.count[int] = field(default_factory=itertools.count)
    later: set[asyncio.Task[None]] = field(default_factory=set)
    """News sent after a delay (`gate_news_delay`), kept until sent."""

    # --- what the watcher would send ------------------------------------------------------

    def summary(self, namespace: str, isvc: str, component: str, index: int) -> InstancePods:
        items = []
        for name, pod in sorted(self.pods.items()):
            labels = pod.labels
            if (
                labels.get("ome.io/instance-index") != str(index)
                or labels.get("ome.io/component") != component
            ):
                continue
            ready = pod.containers_ready and pod.phase == "Running"
            container = ContainerSummary(
                name="engine",
                ready=ready,
                state="waiting" if pod.waiting else "running",
                waiting_reason=pod.waiting,
                restart_count=pod.restart_count,
                last_terminated_reason="Error" if pod.restart_count else None,
                last_terminated_exit_code=1 if pod.restart_count else None,
            )
            items.append(
                PodSummary(
                    name=name,
                    uid=pod.uid,
                    role=labels["ome.io/role"],
                    revision=labels["ome.io/revision"],
                    incarnation=int(labels["ome.io/incarnation"]),
                    phase=pod.phase,
                    created_at=pod.created_at,
                    pod_ip="10.0.0.1",
                    node_name="node-1",
                    node_ready=pod.node_ready,  # type: ignore[arg-type]
                    scheduled=True,
                    containers_ready=ready,
                    ready=ready and pod.serving is True,
                    ready_since=pod.created_at,
                    has_serving_gate=True,
                    serving=None if pod.serving is None else ("True" if pod.serving else "False"),
                    containers=(container,),
                    restart_count=pod.restart_count,
                )
            )
        return InstancePods(
            namespace=namespace, isvc=isvc, component=component, index=index, pods=tuple(items)
        )

    async def notify(self, namespace: str, isvc: str, component: str, index: int) -> None:
        if self.on_change is not None:
            self.on_change(self)
        handle = self.client.get_workflow_handle(instance_workflow_id(namespace, isvc, component, index))
        await handle.signal(SIGNAL_PODS_CHANGED, self.summary(namespace, isvc, component, index))

    async def notify_pod(self, manifest: dict[str, Any]) -> None:
        labels = manifest["metadata"]["labels"]
        await self.notify(
            manifest["metadata"]["namespace"],
            labels["ome.io/inferenceservice"],
            labels["ome.io/component"],
            int(labels["ome.io/instance-index"]),
        )

    async def notify_pod_after(self, manifest: dict[str, Any], seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.notify_pod(manifest)

    # --- test controls ----------------------------------------------------------------------

    async def kill(self, name: str) -> None:
        """A pod deleted from outside (kubectl delete, eviction)."""
        pod = self.pods.pop(name)
        await self.notify_pod(pod.manifest)

    async def crash(self, name: str) -> None:
        pod = self.pods[name]
        pod.restart_count += 1
        await self.notify_pod(pod.manifest)

    # --- activities -------------------------------------------------------------------------

    def activities(self, signals: list[Callable[..., Any]] | None = None) -> list[Callable[..., Any]]:
        """The fake Kubernetes activities, and `signals` for the activity that signals other
        workflows (default: the real one, which reports to a parent with the worker's client)."""

        @activity.defn(name=KUBE_CREATE_PODS)
        async def create_pods(arg: CreatePodsInput) -> CreatePodsResult:
            out = []
            for manifest in arg.pods:
                name = manifest["metadata"]["name"]
                existing = self.pods.get(name)
                if existing is not None:
                    same = existing.labels == manifest["metadata"]["labels"]
                    out.append(
                        CreatedPod(name=name, outcome="exists" if same else "occupied", uid=existing.uid)
                    )
                    continue
                image = manifest["spec"]["containers"][0]["image"]
                if image == "invalid":
                    raise ApplicationError(
                        "spec.containers[0].image: Invalid", type=KubeErrorType.INVALID, non_retryable=True
                    )
                pod = FakePod(
                    manifest=manifest, uid=f"uid-{next(self.uids)}", image=image, created_at=datetime.now(UTC)
                )
                if image in self.bad_images:
                    pod.containers_ready, pod.waiting, pod.phase = False, "ErrImagePull", "Pending"
                self.pods[name] = pod
                self.created.append(name)
                gated = self.gate_at_create and arg.serving is not None and arg.serving.serving
                if gated:
                    pod.serving = True
                    self.serving_log.append((name, True))
                out.append(CreatedPod(name=name, outcome="created", uid=pod.uid, gated=gated))
            await self.notify_pod(arg.pods[0])
            return CreatePodsResult(pods=out)

        @activity.defn(name=KUBE_DELETE_PODS)
        async def delete_pods(arg: DeletePodsInput) -> DeletePodsResult:
            self.delete_calls.append((tuple(arg.names), arg.out_of_rotation is not None))
            if arg.out_of_rotation is not None:
                await set_serving(arg.out_of_rotation)
            result = DeletePodsResult()
            manifest = None
            for name in arg.names:
                pod = self.pods.get(name)
                if pod is None:
                    result.already_gone.append(name)
                elif arg.uids.get(name, pod.uid) != pod.uid:
                    result.replaced.append(name)
                else:
                    manifest = self.pods.pop(name).manifest
                    self.deleted.append(name)
                    result.deleted.append(name)
            if manifest is not None and not self.lose_gone_signals:
                await self.notify_pod(manifest)
            return result

        @activity.defn(name=KUBE_FORCE_DELETE_POD)
        async def force_delete_pod(arg: ForceDeletePodInput) -> DeletePodsResult:
            self.pods.pop(arg.name, None)
            return DeletePodsResult(deleted=[arg.name])

        @activity.defn(name=KUBE_SET_SERVING)
        async def set_serving(arg: SetServingInput) -> SetServingResult:
            result = SetServingResult()
            manifest = None
            for name in arg.pods:
                pod = self.pods.get(name)
                if pod is None or arg.uids.get(name, pod.uid) != pod.uid:
                    result.missing.append(name)
                    continue
                pod.serving = arg.serving
                manifest = pod.manifest
                self.serving_log.append((name, arg.serving))
                result.changed.append(name)
            if manifest is not None and self.gate_news_delay is not None:
                news = asyncio.create_task(self.notify_pod_after(manifest, self.gate_news_delay))
                self.later.add(news)
                news.add_done_callback(self.later.discard)
            elif manifest is not None:
                await self.notify_pod(manifest)
            return result

        @activity.defn(name=KUBE_LIST_INSTANCE_PODS)
        async def list_instance_pods(arg: ListInstancePodsInput) -> InstancePods:
            return self.summary(arg.namespace, arg.isvc, arg.component, arg.index)

        @activity.defn(name=KUBE_PODS_GONE)
        async def pods_gone(arg: PodsGoneInput) -> PodsGoneResult:
            remaining = [
                n
                for n in arg.names
                if n in self.pods and arg.uids.get(n, self.pods[n].uid) == self.pods[n].uid
            ]
            return PodsGoneResult(remaining=remaining)

        @activity.defn(name=KUBE_APPLY_OBJECT)
        async def apply_object(arg: ApplyObjectInput) -> ApplyObjectResult:
            meta = arg.manifest["metadata"]
            key = f"{arg.manifest['kind']}/{meta['name']}"
            action = "updated" if key in self.objects else "created"
            services = sum(1 for name in self.objects if name.startswith("Service/"))
            full = self.services_quota is not None and services >= self.services_quota
            if action == "created" and arg.manifest["kind"] == "Service" and full:
                raise ApplicationError(
                    f'apply Service: HTTP 403 Forbidden: services "{meta["name"]}" is forbidden: exceeded quota: '
                    f"svc, requested: services=1, used: services={services}, limited: services={self.services_quota}",
                    type=KubeErrorType.QUOTA_EXCEEDED,
                    non_retryable=True,
                )
            self.objects[key] = arg.manifest
            ref = ObjectRef(
                api_version=arg.manifest["apiVersion"],
                kind=arg.manifest["kind"],
                name=meta["name"],
                namespace=meta.get("namespace"),
            )
            return ApplyObjectResult(ref=ref, action=action)  # type: ignore[arg-type]

        @activity.defn(name=KUBE_DELETE_OBJECT)
        async def delete_object(arg: DeleteObjectInput) -> DeleteObjectResult:
            return DeleteObjectResult(
                deleted=self.objects.pop(f"{arg.ref.kind}/{arg.ref.name}", None) is not None
            )

        @activity.defn(name=KUBE_READ_OBJECT)
        async def read_object(arg: ReadObjectInput) -> ReadObjectResult:
            found = self.objects.get(f"{arg.ref.kind}/{arg.ref.name}")
            return ReadObjectResult(found=found is not None, object=found)

        @activity.defn(name=KUBE_PATCH_OBJECT)
        async def patch_object(arg: PatchObjectInput) -> PatchObjectResult:
            pod = self.pods.get(arg.ref.name)
            if pod is None:
                return PatchObjectResult(found=False)
            assert isinstance(arg.patch, dict)
            pod.labels.update(arg.patch["metadata"]["labels"])
            pod.image = arg.patch["spec"]["containers"][0]["image"]
            pod.restart_count += 0
            await self.notify_pod(pod.manifest)
            return PatchObjectResult()

        @activity.defn(name=KUBE_RECORD_EVENT)
        async def record_event(arg: RecordEventInput) -> RecordEventResult:
            self.events.append((arg.reason, arg.message))
            return RecordEventResult(name=arg.reason, count=1)

        @activity.defn(name=KUBE_CRD_EXISTS)
        async def crd_exists(arg: CrdExistsInput) -> CrdExistsResult:
            return CrdExistsResult(exists=self.crd, established=self.crd)

        return [
            create_pods,
            delete_pods,
            force_delete_pod,
            set_serving,
            list_instance_pods,
            pods_gone,
            apply_object,
            delete_object,
            read_object,
            patch_object,
            record_event,
            crd_exists,
            *(SignalActivities().activities() if signals is None else signals),
        ]

    def reasons(self) -> list[str]:
        return [reason for reason, _ in self.events]
