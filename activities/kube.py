"""Kubernetes activities: the pods of Instances, plus every generic object activity.

`KubeActivities(api_client)` is what the worker registers (`activities/registry.py`). The
methods are plain `def`s because the official client is synchronous; the worker runs them
on its thread pool. Each takes one model from `models/kube_ops.py` and returns a small
model; failures leave as typed `ApplicationError`s (`activities/kube_errors.py`).

Pod operations are idempotent by construction:
- create: a pod that already exists with our Instance's labels and the same revision and
  incarnation is success (a retried create after a lost answer); one of the same Instance
  but another incarnation still holds the name (`occupied`, the workflow waits for it to
  go); anyone else's pod with that name is a non-retryable `NameTaken`.
- delete: NotFound is success; a uid precondition keeps a retried delete from removing a
  replacement that reused the name.
- serving condition: by default read first and written only when it differs (a retry writes
  nothing). `write_only` sends one PATCH per pod without reading (the Instance's local path);
  a pod the caller says already has the wanted status (`current`) gets the write without a
  `lastTransitionTime`, which the strategic merge (conditions merge by `type`) keeps as it was,
  so either way `lastTransitionTime` only moves when the status does.
"""

from __future__ import annotations

from typing import Any, Literal

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.kube_errors import (
    QUOTA_REFUSALS,
    api_errors,
    cap,
    is_already_exists,
    is_conflict,
    is_quota_refusal,
)
from activities.kube_objects import CONFLICT_ATTEMPTS, ObjectActivities, heartbeat, now_rfc3339
from activities.kube_rest import CONTENT_TYPES, collection_path
from models.kube_ops import (
    KUBE_CREATE_PODS,
    KUBE_DELETE_PODS,
    KUBE_FORCE_DELETE_POD,
    KUBE_LIST_COMPONENT_PODS,
    KUBE_LIST_INSTANCE_PODS,
    KUBE_PODS_GONE,
    KUBE_SET_SERVING,
    ComponentPods,
    CreatedPod,
    CreatePodsInput,
    CreatePodsResult,
    DeletePodsInput,
    DeletePodsResult,
    ForceDeletePodInput,
    KubeErrorType,
    ListComponentPodsInput,
    ListInstancePodsInput,
    PodsGoneInput,
    PodsGoneResult,
    SetServingInput,
    SetServingResult,
)
from models.pods import (
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INSTANCE_INDEX,
    LABEL_ISVC,
    LABEL_REVISION,
    LABEL_ROLE,
    SERVING_CONDITION,
    InstancePods,
)
from planning.pod_summary import component_pods, instance_pods, listed_pods

# Labels that say which Instance a pod belongs to, and which generation of it.
INSTANCE_LABELS = (LABEL_ISVC, LABEL_COMPONENT, LABEL_INSTANCE_INDEX)
GENERATION_LABELS = (LABEL_ROLE, LABEL_REVISION, LABEL_INCARNATION)
COMPONENT_LIST_PAGE = 500
"""Pods per page of the component re-list (`limit` with `continue` tokens, as Kubernetes pages)."""


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _pod_path(namespace: str, name: str, subresource: str | None = None) -> str:
    path = f"{collection_path('v1', 'pods', namespace)}/{name}"
    return f"{path}/{subresource}" if subresource else path


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The label the EndpointSlice controller puts on every slice of a Service."""


class KubeActivities(ObjectActivities):
    """Every Kubernetes activity, bound to one cluster's API client."""

    def __init__(self, api_client: ApiClient, cluster: str = "") -> None:
        super().__init__(api_client, cluster)

    def activities(self) -> list[Any]:
        """The bound activity methods, for `Worker(activities=...)`."""
        return [
            self.create_pods,
            self.delete_pods,
            self.force_delete_pod,
            self.set_serving_condition,
            self.list_instance_pods,
            self.list_component_pods,
            self.pods_gone,
            self.apply_object,
            self.patch_object,
            self.patch_status,
            self.delete_object,
            self.read_object,
            self.list_objects,
            self.record_event,
            self.crd_exists,
        ]

    # --- create --------------------------------------------------------------------------

    @activity.defn(name=KUBE_CREATE_PODS)
    def create_pods(self, request: CreatePodsInput) -> CreatePodsResult:
        outcomes: list[CreatedPod] = []
        foreign: list[str] = []
        for position, manifest in enumerate(request.pods):
            heartbeat(position)
            metadata = manifest.get("metadata") or {}
            name = str(metadata.get("name") or "")
            namespace = metadata.get("namespace") or request.namespace
            if not name or namespace != request.namespace:
                raise ApplicationError(
                    f"pods[{position}].metadata: name {name!r} / namespace {namespace!r} must be set and "
                    f"equal the request's namespace {request.namespace!r}; fix the pod manifest",
                    type=KubeErrorType.INVALID.value,
                    non_retryable=True,
                )
            body = {**manifest, "metadata": {**metadata, "namespace": namespace}}
            try:
                outcome = self._create_pod(request.namespace, name, body)
            except ApplicationError as error:
                if not request.partial_on_quota or error.type not in QUOTA_REFUSALS:
                    raise
                # The pods made so far, and the refusal: the caller asks only for the rest.
                return CreatePodsResult(pods=outcomes, refused=KubeErrorType(error.type), refused_message=str(error))
            if outcome is None:
                foreign.append(name)
                continue
            if request.serving is not None and outcome.outcome != "occupied" and not outcome.terminating:
                gate = request.serving.model_copy(update={"pods": [name], "uids": {name: outcome.uid}})
                action = f"set {SERVING_CONDITION}=True on new pod {namespace}/{name}"
                written = self._write_serving(gate, name, "True", action) == "changed"
                outcome = outcome.model_copy(update={"gated": written})
            outcomes.append(outcome)
        if foreign:
            raise ApplicationError(
                cap(
                    f"pod name(s) {', '.join(foreign)} in namespace {request.namespace} are taken by pods that "
                    f"do not belong to this Instance (labels {', '.join(INSTANCE_LABELS)} differ); delete or "
                    f"rename those pods, or choose another InferenceService name"
                ),
                {"pods": foreign},
                type=KubeErrorType.NAME_TAKEN.value,
                non_retryable=True,
            )
        return CreatePodsResult(pods=outcomes)

    def _create_pod(self, namespace: str, name: str, body: dict[str, Any]) -> CreatedPod | None:
        """Create one pod; the outcome, or None when another owner's pod holds the name. A pod
        already there is read and judged by its labels, whether the API server answered the
        post with 409 or, its quota full, with 403 (the quota judges before any name check)."""
        wanted = _labels(body)
        action = f"create pod {namespace}/{name}"
        for _attempt in range(CONFLICT_ATTEMPTS):
            with api_errors(action):
                try:
                    created = self.rest.request(
                        "POST", collection_path("v1", "pods", namespace), query=self._write_query(), body=body
                    )
                    return self._created(created, "created")
                except ApiException as error:
                    taken = is_already_exists(error)
                    if not taken and not is_quota_refusal(error):
                        raise
                    # The API server finds a name taken only after its quota admitted the pod (and
                    # charged it): a full quota refuses first. Either way the pod may be ours, made
                    # by an earlier try whose answer was lost.
                    existing = self.rest.get_or_none(_pod_path(namespace, name))
                    if existing is None and not taken:
                        raise  # the quota refused a pod not made yet
            if existing is None:
                # Deleted between our create and our read: try the create again.
                continue
            have = _labels(existing)
            if any(have.get(key) != wanted.get(key) for key in INSTANCE_LABELS):
                return None
            terminating = bool((existing.get("metadata") or {}).get("deletionTimestamp"))
            same = all(have.get(key) == wanted.get(key) for key in GENERATION_LABELS)
            return self._created(existing, "exists" if same and not terminating else "occupied")
        raise ApplicationError(
            f"{action}: the name was freed and taken again {CONFLICT_ATTEMPTS} times; retrying",
            type=KubeErrorType.CONFLICT.value,
        )

    @staticmethod
    def _created(pod: dict[str, Any], outcome: Literal["created", "exists", "occupied"]) -> CreatedPod:
        metadata = pod.get("metadata") or {}
        labels = metadata.get("labels") or {}
        incarnation = labels.get(LABEL_INCARNATION)
        return CreatedPod(
            name=str(metadata.get("name")),
            outcome=outcome,
            uid=str(metadata.get("uid") or ""),
            revision=str(labels.get(LABEL_REVISION) or ""),
            incarnation=int(str(incarnation)) if str(incarnation or "").isdigit() else None,
            terminating=bool(metadata.get("deletionTimestamp")),
        )

    # --- delete --------------------------------------------------------------------------

    def _delete_pods(
        self, namespace: str, names: list[str], uids: dict[str, str], grace: int | None
    ) -> DeletePodsResult:
        deleted: list[str] = []
        gone: list[str] = []
        replaced: list[str] = []
        for position, name in enumerate(names):
            heartbeat(position)
            options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if grace is not None:
                options["gracePeriodSeconds"] = grace
            if uids.get(name):
                options["preconditions"] = {"uid": uids[name]}
            with api_errors(f"delete pod {namespace}/{name}"):
                try:
                    self.rest.request("DELETE", _pod_path(namespace, name), body=options)
                    deleted.append(name)
                except ApiException as error:
                    if error.status == 404:
                        gone.append(name)
                    elif is_conflict(error) and uids.get(name):
                        # uid precondition failed: the pod we meant is gone, a new one has its name.
                        replaced.append(name)
                    else:
                        raise
        return DeletePodsResult(deleted=deleted, already_gone=gone, replaced=replaced)

    @activity.defn(name=KUBE_DELETE_PODS)
    def delete_pods(self, request: DeletePodsInput) -> DeletePodsResult:
        if request.out_of_rotation is not None:
            self.set_serving_condition(request.out_of_rotation)
        return self._delete_pods(request.namespace, request.names, request.uids, request.grace_period_seconds)

    @activity.defn(name=KUBE_FORCE_DELETE_POD)
    def force_delete_pod(self, request: ForceDeletePodInput) -> DeletePodsResult:
        uids = {request.name: request.uid} if request.uid else {}
        return self._delete_pods(request.namespace, [request.name], uids, 0)

    # --- serving condition ---------------------------------------------------------------

    @activity.defn(name=KUBE_SET_SERVING)
    def set_serving_condition(self, request: SetServingInput) -> SetServingResult:
        changed: list[str] = []
        unchanged: list[str] = []
        missing: list[str] = []
        wanted = "True" if request.serving else "False"
        for position, name in enumerate(request.pods):
            heartbeat(position)
            outcome = self._set_serving(request, name, wanted)
            {"changed": changed, "unchanged": unchanged, "missing": missing}[outcome].append(name)
        return SetServingResult(changed=changed, unchanged=unchanged, missing=missing)

    def _set_serving(self, request: SetServingInput, name: str, wanted: str) -> str:
        action = f"set {SERVING_CONDITION}={wanted} on pod {request.namespace}/{name}"
        if request.write_only:
            return self._write_serving(request, name, wanted, action)
        for attempt in range(CONFLICT_ATTEMPTS):
            with api_errors(action):
                pod = self.rest.get_or_none(_pod_path(request.namespace, name))
                if pod is None or (request.uids.get(name) and _uid(pod) != request.uids[name]):
                    return "missing"
                conditions = (pod.get("status") or {}).get("conditions") or []
                current = next((c for c in conditions if c.get("type") == SERVING_CONDITION), None)
                if current is not None and current.get("status") == wanted:
                    return "unchanged"
                condition = self._serving_condition(request, wanted)
                # resourceVersion + uid make the write conditional on what we just read.
                body = {
                    "metadata": {"uid": _uid(pod), "resourceVersion": pod["metadata"].get("resourceVersion")},
                    "status": {"conditions": [condition]},
                }
                try:
                    self._patch_pod_status(request.namespace, name, body)
                    return "changed"
                except ApiException as error:
                    if error.status == 404:
                        return "missing"
                    if is_conflict(error) and attempt + 1 < CONFLICT_ATTEMPTS:
                        continue
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _write_serving(self, request: SetServingInput, name: str, wanted: str, action: str) -> str:
        """One PATCH, conditional on the pod's uid when `uids` names it (no resourceVersion:
        the condition is ours alone, so a concurrent write to the pod is no conflict)."""
        uid = request.uids.get(name)
        condition = self._serving_condition(request, wanted)
        if request.current.get(name) == wanted:
            del condition["lastTransitionTime"]  # no transition: the merge keeps the old one
        body: dict[str, Any] = {"status": {"conditions": [condition]}}
        if uid:
            body["metadata"] = {"uid": uid}
        with api_errors(action):
            try:
                self._patch_pod_status(request.namespace, name, body)
            except ApiException as error:
                if error.status == 404:
                    return "missing"
                if not (uid and is_conflict(error)):
                    raise
                # Only our uid precondition can conflict: another pod holds the name now, unless
                # the answer was a transient 409, which a read tells apart (retry then).
                pod = self.rest.get_or_none(_pod_path(request.namespace, name))
                if pod is None or _uid(pod) != uid:
                    return "missing"
                raise
        return "changed"

    def _patch_pod_status(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        self.rest.request(
            "PATCH",
            _pod_path(namespace, name, "status"),
            query=self._write_query(),
            body=body,
            content_type=CONTENT_TYPES["strategic"],
        )

    @staticmethod
    def _serving_condition(request: SetServingInput, wanted: str) -> dict[str, Any]:
        return {
            "type": SERVING_CONDITION,
            "status": wanted,
            "reason": request.reason,
            "message": cap(request.message, 500),
            "lastTransitionTime": now_rfc3339(),
            "lastProbeTime": None,
        }

    # --- observation ---------------------------------------------------------------------

    @activity.defn(name=KUBE_LIST_INSTANCE_PODS)
    def list_instance_pods(self, request: ListInstancePodsInput) -> InstancePods:
        selector = ",".join(
            (
                f"{LABEL_ISVC}={request.isvc}",
                f"{LABEL_COMPONENT}={request.component}",
                f"{LABEL_INSTANCE_INDEX}={request.index}",
            )
        )
        where = f"{request.namespace}/{request.isvc}-{request.component}-{request.index}"
        with api_errors(f"list pods of Instance {where}"):
            listed = self.rest.get(
                collection_path("v1", "pods", request.namespace), [("labelSelector", selector)]
            )
            pods = list(listed.get("items") or [])
            nodes: dict[str, dict[str, Any]] = {}
            for node_name in sorted({(p.get("spec") or {}).get("nodeName") or "" for p in pods} - {""}):
                node = self.rest.get_or_none(f"/api/v1/nodes/{node_name}")
                if node is not None:
                    nodes[node_name] = node
            endpoints = (
                self._endpoint_listing(request.namespace, f"{request.isvc}-{request.component}-{request.index}")
                if request.endpoints
                else None
            )
        return instance_pods(
            (request.namespace, request.isvc, request.component, request.index),
            pods,
            nodes,
            resource_version=str((listed.get("metadata") or {}).get("resourceVersion") or ""),
            cluster=self.cluster,
            endpoints=endpoints,
        )

    @activity.defn(name=KUBE_LIST_COMPONENT_PODS)
    def list_component_pods(self, request: ListComponentPodsInput) -> ComponentPods:
        """One label-selector list of the component's pods and nothing else: the
        InferenceReplica's safety re-list, cheap enough to run for every component. With
        `indexes`, the selector names those Instances, so only their pods come back."""
        selector = f"{LABEL_ISVC}={request.isvc},{LABEL_COMPONENT}={request.component}"
        if request.indexes is not None:
            if not request.indexes:
                return ComponentPods()
            selector += f",{LABEL_INSTANCE_INDEX} in ({','.join(map(str, sorted(set(request.indexes))))})"
        pods: list[dict[str, Any]] = []
        version = ""
        token = ""
        with api_errors(f"list pods of component {request.namespace}/{request.isvc}-{request.component}"):
            while True:  # paged, so 2000 Instances' pods never come in one response
                query = [("labelSelector", selector), ("limit", str(COMPONENT_LIST_PAGE))]
                if token:
                    query.append(("continue", token))
                listed = self.rest.get(collection_path("v1", "pods", request.namespace), query)
                pods.extend(listed.get("items") or [])
                metadata = listed.get("metadata") or {}
                version = version or str(metadata.get("resourceVersion") or "")
                token = str(metadata.get("continue") or "")
                if not token:
                    break
        return component_pods(pods, version)

    def _endpoint_listing(self, namespace: str, service: str) -> set[tuple[str, str]] | None:
        """Pods the Instance's headless Service lists as serving (`listed_pods`); None when no slice says.

        Only that Service's slices: the component Service's list every pod of the component."""
        try:
            slices = self.rest.get(
                collection_path("discovery.k8s.io/v1", "endpointslices", namespace),
                [("labelSelector", f"{SERVICE_NAME_LABEL}={service}")],
            )
        except ApiException as error:
            if error.status in (403, 404):
                return None
            raise
        items = list(slices.get("items") or [])
        # No slice at all means nobody publishes endpoints for this service (yet): unknown,
        # not "none listed", or every pod would read as unavailable.
        return listed_pods(items) if items else None

    @activity.defn(name=KUBE_PODS_GONE)
    def pods_gone(self, request: PodsGoneInput) -> PodsGoneResult:
        remaining: list[str] = []
        for position, name in enumerate(request.names):
            heartbeat(position)
            with api_errors(f"read pod {request.namespace}/{name}"):
                pod = self.rest.get_or_none(_pod_path(request.namespace, name))
            if pod is None:
                continue
            if request.uids.get(name) and _uid(pod) != request.uids[name]:
                continue
            remaining.append(name)
        return PodsGoneResult(remaining=remaining)
