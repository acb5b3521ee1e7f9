"""What the product asks of the API server, measured: the input to the RBAC drift test.

`product_requests()` runs the worker's Kubernetes activities and the pod watcher against a
fresh kubesim, the way the workflows use them, on objects the planners render from the
example InferenceService and runtime in `deploy/examples/`: the InferenceService object and
its status, a TrafficMap and its global route with ExternalName backends, the component's Service, PodDisruptionBudget, Deployment (RawDeployment) and
InferenceReplica with its status, an Instance's headless Service, PodGroup and pods (created
twice, patched in place, put in rotation, listed, deleted), the runtime lookups, the PodGroup
CRD check and aggregated Events, a canary analysis sample reading its bearer-token Secret, and
the watcher's pass over a WorkloadCluster (listed, its kubeconfig Secret read, its `Ready`
condition written). Then it reads kubesim's request counters.

The counters name a request by verb and resource (`patch pods/status`) but not by API group,
so the API client is wrapped to log each request's path too; the group of every counted
request comes from that log. Set-up done for the test's sake (the namespace, the runtime a
user would apply) happens before the counters are reset.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import kubernetes
import yaml
from temporalio.testing import ActivityEnvironment

from activities.kube import KubeActivities
from activities.kube_nodes import NodeActivities
from activities.migration import MigrationActivities
from activities.prometheus import PrometheusActivities
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from models.admission import admit
from models.canary_analysis import AnalysisSampleInput, BearerTokenRef, PrometheusTarget, TemplateFields
from models.inferenceservice import AnalysisMetric, InferenceService
from models.kube_ops import (
    PODGROUP_CRD,
    ApplyObjectInput,
    CrdExistsInput,
    CreatePodsInput,
    DeleteObjectInput,
    DeletePodsInput,
    EvictPodInput,
    ForceDeletePodInput,
    ListComponentPodsInput,
    ListInstancePodsInput,
    ListNodePodsInput,
    ListObjectsInput,
    ObjectRef,
    PatchObjectInput,
    PatchStatusInput,
    PodsGoneInput,
    ReadObjectInput,
    RecordEventInput,
    SetServingInput,
)
from models.migration import AuditRowInput
from models.pods import InstancePods
from models.resolution import effective_component, inference_replica_spec
from models.runtime import ClusterServingRuntime
from models.trafficmap import TrafficMapEntry, TrafficMapSpec
from planning.instance.pods import (
    in_place_image_patches,
    render_headless_service,
    render_pod_group,
    render_pods,
)
from planning.replica.budget import update_policy
from planning.replica.manifest import render_inference_replica
from planning.replica.template import ClusterLifecycle, InstanceIdentity, instance_spec
from planning.service.components import plan_components
from planning.service.deployment import DeploymentObserved
from planning.service.objects import render_deployment, render_pdb, render_service
from planning.trafficmap import objects as map_objects
from planning.trafficmap import publication
from tests.fixtures.kubesim import TEST_TOPOLOGY
from tests.kubesim.activity_objects import WAIT_SECONDS, wait_for
from workers.clusters import ClusterDirectory
from workers.watch.deployments import DeploymentWatcher
from workers.watch.pods import PodWatcher

T = TypeVar("T")
EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


@dataclass(frozen=True)
class Usage:
    """What one run of the product against kubesim asked of the API server."""

    requests: set[Request]
    counters: dict[tuple[str, str], int]
    """kubesim's own count of requests by (verb, resource)."""
    activities: set[str]
    """The activity methods the run exercised, to compare with what the worker registers."""


@dataclass(frozen=True)
class Request:
    """One kind of API request, as RBAC sees it."""

    group: str
    resource: str  # plural, or plural/subresource
    verb: str


def example_isvc() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EXAMPLES / "qwen3-0-6b.json").read_text())
    return loaded


def example_runtime() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / "srt-qwen3-0-6b.yaml").read_text())
    return loaded


def _request_of(method: str, url: str) -> tuple[str, str, str]:
    """(group, resource[/subresource], verb) of one request URL, as the API server's RBAC reads it."""
    parts = urlsplit(url)
    segments = parts.path.strip("/").split("/")
    if segments[0] == "api":
        group, rest = "", segments[2:]
    else:
        group, rest = segments[1], segments[3:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    watching = parse_qs(parts.query).get("watch") == ["true"]
    verb = {
        "GET": "get" if named else ("watch" if watching else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if named else "deletecollection",
    }[method]
    return group, resource, verb


def logged_client(sim: KubeSim, log: set[tuple[str, str, str]]) -> Any:
    """An API client of `sim` that adds (group, resource, verb) of every request to `log`."""
    client = sim.api_client()
    call_api = client.call_api

    def logging_call_api(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        log.add(_request_of(method, url))
        return call_api(method, url, *args, **kwargs)

    client.call_api = logging_call_api
    return client


_exercised: set[str] = set()
"""Names of the activity methods `_run` has run since `product_requests` started."""


def _run(fn: Callable[[Any], T], arg: Any) -> T:
    _exercised.add(fn.__name__)
    return ActivityEnvironment().run(fn, arg)


def _relabelled(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with one more label: applying it again takes apply's update path."""
    changed = copy.deepcopy(manifest)
    changed["metadata"].setdefault("labels", {})["example.com/reapplied"] = "true"
    return changed


def _apply_twice(kube: KubeActivities, manifest: dict[str, Any], plural: str | None = None) -> str:
    """Create, then change: both paths of `apply_object`. The object's uid."""
    created = _run(kube.apply_object, ApplyObjectInput(manifest=manifest, plural=plural))
    assert created.action == "created", created
    updated = _run(kube.apply_object, ApplyObjectInput(manifest=_relabelled(manifest), plural=plural))
    assert updated.action == "updated", updated
    return updated.ref.uid or ""


def exercise_activities(
    kube: KubeActivities, nodes: NodeActivities, sim: KubeSim, summaries: list[InstancePods]
) -> None:
    """Every Kubernetes activity, on the objects the planners render for the example.

    `summaries` is what the watcher has sent so far: the pod is deleted only once the watcher
    has reported it serving, so its whole path is exercised too.
    """
    manifest = example_isvc()
    runtime = ClusterServingRuntime.model_validate(example_runtime()).spec
    isvc = InferenceService.model_validate(manifest)
    namespace, name = isvc.namespace, isvc.name

    # The InferenceService workflow: its object, the runtime lookup, its status.
    isvc_ref = ObjectRef(
        api_version="ome.io/v1beta1", kind="InferenceService", name=name, namespace=namespace
    )
    uid = _apply_twice(kube, manifest, "inferenceservices")
    for kind, plural, where in (
        ("ServingRuntime", "servingruntimes", namespace),
        ("ClusterServingRuntime", "clusterservingruntimes", None),
    ):
        ref = ObjectRef(
            api_version="ome.io/v1beta1", kind=kind, name="srt-qwen3-0-6b", namespace=where, plural=plural
        )
        _run(kube.read_object, ReadObjectInput(ref=ref))
    _run(kube.patch_status, PatchStatusInput(ref=isvc_ref, status={"observedGeneration": 1}))

    # Per-component objects: OMENative (Service, PDB, InferenceReplica) and RawDeployment.
    (plan,) = plan_components(isvc, runtime)
    _apply_twice(kube, render_service(plan, name, namespace, uid))
    policy = update_policy(plan.effective.lifecycle, ClusterLifecycle().update_policy)
    _apply_twice(kube, render_pdb(plan, name, namespace, uid, policy))
    replica = render_inference_replica(inference_replica_spec(isvc, runtime, plan.name), name, namespace, uid)
    _apply_twice(kube, replica, "inferencereplicas")
    replica_ref = ObjectRef(
        api_version=replica["apiVersion"],
        kind="InferenceReplica",
        name=replica["metadata"]["name"],
        namespace=namespace,
        plural="inferencereplicas",
    )
    _run(kube.patch_status, PatchStatusInput(ref=replica_ref, status={"replicas": 0}))
    _run(
        kube.list_objects,
        ListObjectsInput(
            api_version="ome.io/v1beta1",
            kind="InferenceReplica",
            plural="inferencereplicas",
            namespace=namespace,
        ),
    )
    raw = copy.deepcopy(manifest)
    raw["spec"].pop("deploymentMode")
    (raw_plan,) = plan_components(InferenceService.model_validate(raw), runtime)
    assert not raw_plan.omenative, "a single-pod engine without deploymentMode runs as a Deployment"
    _apply_twice(kube, render_deployment(raw_plan, name, namespace, uid, replicas=0))

    # An Instance: headless Service, PodGroup (multi-pod), pods through their life.
    effective = effective_component(admit(manifest, runtime=runtime).isvc or isvc, runtime, "engine")
    assert effective is not None
    identity = InstanceIdentity(
        namespace=namespace,
        isvc=name,
        component="engine",
        index=0,
        revision=plan.revision_hash,
        revision_name=plan.revision_name,
        isvc_uid=uid,
    )
    spec = instance_spec(identity, effective, ClusterLifecycle(), policy)
    _apply_twice(kube, render_headless_service(spec))
    assert _run(kube.crd_exists, CrdExistsInput(name=PODGROUP_CRD)).established
    gang = spec.model_copy(update={"index": 1, "worker_count": 1, "worker_pod_spec": spec.leader_pod_spec})
    group = render_pod_group(gang)
    assert group is not None
    _apply_twice(kube, group, "podgroups")

    pods = render_pods(spec, incarnation=1)
    created = _run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=pods))
    again = _run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=pods))
    assert [p.outcome for p in again.pods] == ["exists"], again
    pod = created.pods[0]
    wait_for(lambda: _scheduled(sim, namespace, pod.name), f"pod {pod.name} to be scheduled")
    listed = _run(
        kube.list_instance_pods,
        ListInstancePodsInput(namespace=namespace, isvc=name, component="engine", index=0),
    )
    assert [p.name for p in listed.pods] == [pod.name], listed
    component = _run(
        kube.list_component_pods, ListComponentPodsInput(namespace=namespace, isvc=name, component="engine")
    )
    assert [index for index, _ in component.digests] == [0], component
    _run(
        kube.set_serving_condition,
        SetServingInput(
            namespace=namespace,
            pods=[pod.name],
            serving=True,
            reason="InstanceReady",
            uids={pod.name: pod.uid},
        ),
    )
    newer = spec.model_copy(update={"revision": "rev2"})
    for pod_name, patch in in_place_image_patches(newer, incarnation=1).items():
        _run(
            kube.patch_object,
            PatchObjectInput(
                ref=ObjectRef(api_version="v1", kind="Pod", name=pod_name, namespace=namespace),
                patch=patch,
                patch_type="strategic",
            ),
        )
    for _ in range(2):  # the second bumps the first Event's count
        _run(
            kube.record_event,
            RecordEventInput(
                involved=isvc_ref.model_copy(update={"uid": uid}), reason="InstanceReady", message="ready"
            ),
        )
    wait_for(
        lambda: any(s.serving_count for s in list(summaries)), f"the watcher to report {pod.name} serving"
    )
    exercise_drain(kube, nodes, sim, namespace, pod.name, pod.uid)
    _run(kube.pods_gone, PodsGoneInput(namespace=namespace, names=[pod.name]))
    _run(kube.delete_pods, DeletePodsInput(namespace=namespace, names=[pod.name], uids={pod.name: pod.uid}))
    _run(kube.force_delete_pod, ForceDeletePodInput(namespace=namespace, name=pod.name))

    # Deletion of everything the InferenceService workflow owns.
    owned: tuple[tuple[str, str, str, str | None], ...] = (
        ("v1", "Service", spec.instance_name, None),
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup", gang.instance_name, "podgroups"),
        ("v1", "Service", f"{name}-engine", None),
        ("policy/v1", "PodDisruptionBudget", f"{name}-engine", None),
        ("apps/v1", "Deployment", f"{name}-engine", None),
        ("ome.io/v1beta1", "InferenceReplica", replica_ref.name, "inferencereplicas"),
        ("ome.io/v1beta1", "InferenceService", name, "inferenceservices"),
    )
    for api_version, kind, object_name, owned_plural in owned:
        ref = ObjectRef(
            api_version=api_version, kind=kind, name=object_name, namespace=namespace, plural=owned_plural
        )
        assert _run(kube.delete_object, DeleteObjectInput(ref=ref)).deleted, ref


def exercise_drain(
    kube: KubeActivities, nodes: NodeActivities, sim: KubeSim, namespace: str, pod: str, uid: str
) -> None:
    """The Drain workflow's calls: cordon the pod's node, list its pods, evict, uncordon."""
    [placed] = [p for p in sim.objects("", "pods", namespace) if p["metadata"]["name"] == pod]
    node = ObjectRef(api_version="v1", kind="Node", name=placed["spec"]["nodeName"])
    _run(kube.patch_object, PatchObjectInput(ref=node, patch={"spec": {"unschedulable": True}}))
    assert pod in [p.name for p in _run(nodes.list_node_pods, ListNodePodsInput(node=node.name)).pods]
    _run(nodes.evict_pod, EvictPodInput(namespace=namespace, name=pod, uid=uid))
    _run(kube.patch_object, PatchObjectInput(ref=node, patch={"spec": {"unschedulable": None}}))


def exercise_trafficmap(kube: KubeActivities, namespace: str, isvc: str) -> None:
    """The TrafficMap workflow's calls: read, write and project its map, publish the route and
    its ExternalName backends (claim check included), drop a stale backend, then withdraw and
    release the finalizer."""
    spec = TrafficMapSpec(service=isvc, entries=[
        TrafficMapEntry(cluster=c, endpoint=f"http://{c}.example/{namespace}/{isvc}", weight=1)
        for c in ("worker-a", "worker-b")
    ])
    ref = ObjectRef(api_version=map_objects.API_VERSION, kind="TrafficMap", name=isvc, namespace=namespace,
                    plural=map_objects.PLURAL)
    _run(kube.read_object, ReadObjectInput(ref=ref))
    _apply_twice(kube, map_objects.map_manifest(namespace, isvc, "", spec), map_objects.PLURAL)
    _run(kube.patch_status, PatchStatusInput(ref=ref, status={"published": True}))
    settings = publication.EndpointSettings("gateways/global", 8080, "{{ .Name }}.example.com")
    planned = publication.plan(namespace, isvc, spec.entries, settings, None)
    assert planned.route is not None
    route = ObjectRef(api_version=publication.ROUTE_API_VERSION, kind=publication.ROUTE_KIND,
                      name=publication.route_name(isvc), namespace=namespace, plural=publication.ROUTE_PLURAL)
    _run(kube.list_objects, ListObjectsInput(api_version=publication.ROUTE_API_VERSION, kind=publication.ROUTE_KIND,
                                             plural=publication.ROUTE_PLURAL))
    for manifest in planned.services:
        _apply_twice(kube, manifest)
    _apply_twice(kube, planned.route, publication.ROUTE_PLURAL)
    _run(kube.read_object, ReadObjectInput(ref=route))
    backends = _run(kube.list_objects, ListObjectsInput(api_version="v1", kind="Service", namespace=namespace,
                                                        label_selector=publication.backend_selector(isvc)))
    for name in publication.stale_services(backends.items, None):
        service = ObjectRef(api_version="v1", kind="Service", name=name, namespace=namespace)
        _run(kube.delete_object, DeleteObjectInput(ref=service))
    _run(kube.delete_object, DeleteObjectInput(ref=route))
    _run(kube.delete_object, DeleteObjectInput(ref=ref))
    _run(kube.patch_object, PatchObjectInput(ref=ref, patch={"metadata": {"finalizers": []}}, missing_ok=True))


ANALYSIS_TOKEN_SECRET = "prometheus-token"


def analysis_token_secret(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": ANALYSIS_TOKEN_SECRET, "namespace": namespace},
        "data": {"token": "dG9rZW4="},
    }


async def exercise_analysis(prometheus: PrometheusActivities, namespace: str) -> None:
    """A canary analysis sample: it reads its bearer token, then finds no Prometheus (nothing
    listens on the port), which is an inconclusive sample, not an error."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    request = AnalysisSampleInput(
        target=PrometheusTarget(
            address=f"http://127.0.0.1:{closed_port}",
            bearer_token=BearerTokenRef(namespace=namespace, name=ANALYSIS_TOKEN_SECRET, key="token"),
        ),
        metrics=[AnalysisMetric(name="error_rate", query="up", operator="LT", threshold="1")],
        fields=TemplateFields(
            namespace=namespace, isvc_name="qwen", component="engine", canary_revision="b", stable_revision="a"
        ),
        time=datetime(2025, 6, 1, tzinfo=UTC),
        query_timeout_seconds=1.0,
        step_number=1,
        sample_number=1,
    )
    sample = await ActivityEnvironment().run(prometheus.analysis_sample, request)
    # The token was read: the entry is the metric's own, not the single `auth` entry.
    assert [r.name for r in sample.metric_results] == ["error_rate"], sample


def exercise_migration_audit(migration: MigrationActivities, namespace: str) -> None:
    """A migration's audit rows: the ConfigMap created on acceptance, updated at its end."""
    for phase in ("Accepted", "Completed"):
        row = {"uuid": "u-1", "component": "engine", "instance": 0, "from_node": "n", "phase": phase}
        written = migration.record_audit(AuditRowInput(namespace=namespace, isvc="qwen", row=row))
        assert written.rows == 1, written


def register_unreachable_cluster(sim: KubeSim, namespace: str) -> None:
    """A WorkloadCluster whose kubeconfig is valid but points at a closed port (set-up)."""
    pem = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    kubeconfig = yaml.safe_dump(
        {
            "clusters": [{"name": "w", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority-data": pem}}],
            "users": [{"name": "w", "user": {"token": "t"}}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
            "current-context": "w",
        }
    )
    kubernetes.client.CoreV1Api(sim.api_client()).create_namespaced_secret(
        namespace,
        {"metadata": {"name": "worker-a-kubeconfig"}, "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}},
    )
    kubernetes.client.CustomObjectsApi(sim.api_client()).create_cluster_custom_object(
        "ome.io",
        "v1beta1",
        "workloadclusters",
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "WorkloadCluster",
            "metadata": {"name": "worker-a"},
            "spec": {"clusterSource": {"kubeConfig": {"secretRef": {"name": "worker-a-kubeconfig", "namespace": namespace}}}},
        },
    )


def exercise_clusters(control_plane: Any) -> None:
    """The watcher's pass over the WorkloadClusters: list, read the Secret, write `Ready`."""
    directory = ClusterDirectory(control_plane, probe_timeout_seconds=1.0)
    try:
        directory.refresh()
        assert directory.write_status() == 1, directory.conditions()
    finally:
        directory.close()


def _scheduled(sim: KubeSim, namespace: str, name: str) -> bool:
    pods = {p["metadata"]["name"]: p for p in sim.objects("", "pods", namespace)}
    return bool((pods.get(name, {}).get("spec") or {}).get("nodeName"))


async def product_requests() -> Usage:
    """The (group, resource, verb) of every request the product sent, and kubesim's counters."""
    _exercised.clear()
    sim = KubeSim(topology=TEST_TOPOLOGY, crds="all", timing=Timing.fast()).start()
    try:
        isvc = example_isvc()
        core = kubernetes.client.CoreV1Api(sim.api_client())
        core.create_namespace(
            kubernetes.client.V1Namespace(
                metadata=kubernetes.client.V1ObjectMeta(name=isvc["metadata"]["namespace"])
            )
        )
        kubernetes.client.CustomObjectsApi(sim.api_client()).create_cluster_custom_object(
            "ome.io", "v1beta1", "clusterservingruntimes", example_runtime()
        )
        core.create_namespaced_secret(
            isvc["metadata"]["namespace"], analysis_token_secret(isvc["metadata"]["namespace"])
        )
        register_unreachable_cluster(sim, isvc["metadata"]["namespace"])
        sim.reset_counters()
        log: set[tuple[str, str, str]] = set()
        summaries: list[InstancePods] = []

        async def sink(workflow_id: str, summary: InstancePods) -> bool:
            summaries.append(summary)
            return True

        async def deployment_sink(workflow_id: str, observed: DeploymentObserved) -> bool:
            return True

        watcher = PodWatcher(logged_client(sim, log), sink)
        deployments = DeploymentWatcher(logged_client(sim, log), deployment_sink)
        await watcher.start()
        await deployments.start()
        try:
            async with asyncio.timeout(WAIT_SECONDS):
                await watcher.wait_synced()
                await deployments.wait_synced()
            await asyncio.to_thread(
                exercise_activities,
                KubeActivities(logged_client(sim, log)),
                NodeActivities(logged_client(sim, log)),
                sim,
                summaries,
            )
            await exercise_analysis(PrometheusActivities(logged_client(sim, log)), isvc["metadata"]["namespace"])
            await asyncio.to_thread(
                exercise_migration_audit, MigrationActivities(logged_client(sim, log)), isvc["metadata"]["namespace"]
            )
            await asyncio.to_thread(exercise_clusters, logged_client(sim, log))
            await asyncio.to_thread(
                exercise_trafficmap, KubeActivities(logged_client(sim, log)), isvc["metadata"]["namespace"],
                isvc["metadata"]["name"],
            )
        finally:
            await watcher.stop()
            await deployments.stop()
        counted: dict[tuple[str, str], int] = sim.counters()["requests"]
    finally:
        sim.stop()
    requests = set()
    for verb, resource in counted:
        groups = {
            group
            for group, logged_resource, logged_verb in log
            if (logged_resource, logged_verb) == (resource, verb)
        }
        assert groups, f"kubesim counted {verb} {resource}, which the product's clients never sent"
        requests |= {Request(group, resource, verb) for group in groups}
    return Usage(requests, counted, set(_exercised))
