"""Names, inputs and results of every Kubernetes activity.

Workflows call activities by these registered names through `workflows/kube_calls.py`;
`activities/kube.py` registers its methods under the same names with the same models, so
the two sides agree without importing each other. Every activity takes one model and
returns one small model, never a raw API object (manifests and object bodies travel as
plain dicts where the activity is generic).

Idempotency is part of the contract: creating what already exists as ours, deleting what
is already gone and setting a condition to the value it has all succeed and say so in the
result, so a retried activity or a replayed step is harmless.

Errors are `ApplicationError`s whose `type` is one of `KubeErrorType`; the non-retryable
ones reach the workflow as the cause of an `ActivityError`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.pods import InstancePods

KUBE_CREATE_PODS = "kube.create_pods"
KUBE_DELETE_PODS = "kube.delete_pods"
KUBE_FORCE_DELETE_POD = "kube.force_delete_pod"
KUBE_SET_SERVING = "kube.set_serving_condition"
KUBE_LIST_INSTANCE_PODS = "kube.list_instance_pods"
KUBE_LIST_COMPONENT_PODS = "kube.list_component_pods"
KUBE_PODS_GONE = "kube.pods_gone"
KUBE_APPLY_OBJECT = "kube.apply_object"
KUBE_PATCH_OBJECT = "kube.patch_object"
KUBE_PATCH_STATUS = "kube.patch_status"
KUBE_DELETE_OBJECT = "kube.delete_object"
KUBE_READ_OBJECT = "kube.read_object"
KUBE_LIST_OBJECTS = "kube.list_objects"
KUBE_RECORD_EVENT = "kube.record_event"
KUBE_CRD_EXISTS = "kube.crd_exists"
KUBE_LIST_NODE_PODS = "kube.list_node_pods"
KUBE_EVICT_POD = "kube.evict_pod"

ALL_KUBE_ACTIVITIES = (
    KUBE_CREATE_PODS,
    KUBE_DELETE_PODS,
    KUBE_FORCE_DELETE_POD,
    KUBE_SET_SERVING,
    KUBE_LIST_INSTANCE_PODS,
    KUBE_LIST_COMPONENT_PODS,
    KUBE_PODS_GONE,
    KUBE_APPLY_OBJECT,
    KUBE_PATCH_OBJECT,
    KUBE_PATCH_STATUS,
    KUBE_DELETE_OBJECT,
    KUBE_READ_OBJECT,
    KUBE_LIST_OBJECTS,
    KUBE_RECORD_EVENT,
    KUBE_CRD_EXISTS,
    KUBE_LIST_NODE_PODS,
    KUBE_EVICT_POD,
)

# The field manager / event reporting component the product writes as.
FIELD_MANAGER = "ome-lifecycle"
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"


class KubeErrorType(StrEnum):
    """`ApplicationError.type` of a failed Kubernetes call; workflows branch on these."""

    # Non-retryable: the request itself is wrong or not allowed; retrying cannot help.
    INVALID = "Invalid"  # 400 BadRequest, 422 Invalid, 415
    FORBIDDEN = "Forbidden"  # 403 (RBAC, admission)
    QUOTA_EXCEEDED = "QuotaExceeded"  # 403 from ResourceQuota admission: wait for room
    NOT_FOUND = "NotFound"  # 404 where the object had to exist
    NAME_TAKEN = "NameTaken"  # 409 AlreadyExists of an object someone else owns
    # Retryable: the cluster is busy, racing or unreachable (or a token is rotating).
    UNAUTHORIZED = "Unauthorized"  # 401
    CONFLICT = "Conflict"  # 409 on a stale resourceVersion
    TOO_MANY_REQUESTS = "TooManyRequests"  # 429, with Retry-After honoured
    SERVER_ERROR = "ServerError"  # 5xx
    QUOTA_NOT_COUNTED = "QuotaNotCounted"  # 403 "status unknown for quota": not counted yet
    UNREACHABLE = "Unreachable"  # connection refused / reset / timeout


NON_RETRYABLE_ERRORS: tuple[KubeErrorType, ...] = (
    KubeErrorType.INVALID,
    KubeErrorType.FORBIDDEN,
    KubeErrorType.QUOTA_EXCEEDED,
    KubeErrorType.NOT_FOUND,
    KubeErrorType.NAME_TAKEN,
)
"""Raised non-retryable by the activities, and never retried by the workflows' policy."""


class _Op(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ObjectRef(_Op):
    """Names one API object. `plural` is needed only for kinds the activity cannot derive."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None  # None for cluster-scoped kinds
    plural: str | None = None
    uid: str | None = None  # precondition for writes; involvedObject.uid for events


# --- pods ------------------------------------------------------------------------------


class SetServingInput(_Op):
    """Set the `ome.io/serving` condition of pods: True puts them in rotation."""

    namespace: str
    pods: list[str]
    serving: bool
    reason: str
    message: str = ""
    uids: dict[str, str] = Field(default_factory=dict)
    write_only: bool = False
    """One PATCH per pod, conditional on its uid, without reading it first: a pod already in
    that state reads as `changed` (its condition is written again), a missing one as `missing`."""
    current: dict[str, str] = Field(default_factory=dict)
    """Write-only: the condition's status each pod is believed to have now ("True"/"False", from
    the workflow's observation). Where it already is the wanted one, the re-write leaves its
    `lastTransitionTime` alone (no transition happened)."""


class CreatePodsInput(_Op):
    """Create a batch of pods. A pod already present counts as created when it carries the
    same isvc/component/index/role/revision/incarnation labels; a pod of the same Instance
    with other labels (an earlier incarnation still terminating) is reported `occupied`;
    anyone else's pod with that name fails the activity with `NameTaken`."""

    namespace: str
    pods: list[dict[str, Any]] = Field(min_length=1)
    serving: SetServingInput | None = None
    """When given (its `serving` True, `pods` empty): each pod this call created, or found
    already made by an earlier attempt of it, gets the `ome.io/serving` gate True right after,
    one status PATCH conditional on its uid. A single-pod Instance's pod then serves as soon as
    its containers are ready, with no round trip through the workflow."""
    partial_on_quota: bool = False
    """When a quota refuses a pod (`QuotaExceeded`, `QuotaNotCounted`), answer the pods made so
    far and the refusal (`CreatePodsResult.refused`) instead of failing the call: the caller
    then knows the pods it has and asks only for the rest next time. A pod posted again is
    charged to the quota before the API server finds its name taken, until the quota is counted
    again, so a gang's leader posted again each try could keep the room its worker needs."""


class CreatedPod(_Op):
    name: str
    outcome: Literal["created", "exists", "occupied"]
    uid: str
    revision: str = ""
    incarnation: int | None = None
    terminating: bool = False
    gated: bool = False
    """The call wrote its `ome.io/serving` gate True (`CreatePodsInput.serving`)."""


class CreatePodsResult(_Op):
    pods: list[CreatedPod]
    refused: KubeErrorType | None = None
    """Under `partial_on_quota`: the quota's refusal of the next pod (the rest were not tried)."""
    refused_message: str = ""

    def names(self, outcome: str) -> list[str]:
        return [pod.name for pod in self.pods if pod.outcome == outcome]


class DeletePodsInput(_Op):
    """Delete pods by name. `uids` (name -> uid) guards against deleting a replacement
    that reused the name; `grace_period_seconds` None keeps each pod's own grace."""

    namespace: str
    names: list[str]
    uids: dict[str, str] = Field(default_factory=dict)
    grace_period_seconds: int | None = Field(default=None, ge=0)
    out_of_rotation: SetServingInput | None = None
    """When given (its `serving` False): its pods are taken out of rotation first, in the same
    call, then `names` are deleted. A teardown with no drain pause between the two makes one
    call of them instead of two."""


class DeletePodsResult(_Op):
    deleted: list[str] = Field(default_factory=list)
    already_gone: list[str] = Field(default_factory=list)
    # The name now belongs to a different pod (uid precondition failed): left alone.
    replaced: list[str] = Field(default_factory=list)


class ForceDeletePodInput(_Op):
    """Delete one pod with grace period 0 (spec §15 force-delete escalation)."""

    namespace: str
    name: str
    uid: str | None = None


class SetServingResult(_Op):
    changed: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    # Missing pods, or pods whose uid differs from `uids`: nothing was written to them.
    missing: list[str] = Field(default_factory=list)


class ListInstancePodsInput(_Op):
    namespace: str
    isvc: str
    component: str
    index: int
    endpoints: bool = True
    """Also read the headless Service's EndpointSlices (`available`); a list taken only to find
    leftover pods before a create does without."""


class ListComponentPodsInput(_Op):
    """Every pod of one component, in one label-selector request (the InferenceReplica's net),
    or only the pods of the Instances at `indexes`."""

    namespace: str
    isvc: str
    component: str
    indexes: tuple[int, ...] | None = None
    """Only these Instances' pods (`ome.io/instance-index in (...)`); None: every pod."""


class ComponentPods(_Op):
    """A component's pods at one moment: per Instance with pods, the digest of what it would
    act on in them (`planning.pod_summary.pods_digest`); Instances with no pod are absent."""

    resource_version: str = ""
    digests: tuple[tuple[int, str], ...] = ()
    """(Instance index, pods digest), by index."""


class PodsGoneInput(_Op):
    """Which of these pods still exist (uid-matched when `uids` names them)?"""

    namespace: str
    names: list[str]
    uids: dict[str, str] = Field(default_factory=dict)


class PodsGoneResult(_Op):
    remaining: list[str] = Field(default_factory=list)

    @property
    def all_gone(self) -> bool:
        return not self.remaining


# --- generic objects --------------------------------------------------------------------


class ApplyObjectInput(_Op):
    """Create the object, or bring the existing one to this manifest (replace with its
    resourceVersion; labels/annotations merged, status and foreign finalizers kept)."""

    manifest: dict[str, Any]
    plural: str | None = None
    replace_spec: bool = False
    """Replace `spec` as a whole (a field the manifest drops goes), as `kubectl apply` does for
    the user's own fields; otherwise maps merge, keeping what the server set."""
    last_applied: bool = False
    """Also write `kubectl.kubernetes.io/last-applied-configuration` as `kubectl apply` does, and
    drop the labels and annotations the previous one named that this manifest no longer does."""
    expect_generation: int | None = None
    """The object generation the writer last knew: an object with a newer generation and another
    `spec` was changed by someone since, and its spec is not overwritten (`superseded`)."""
    create_first: bool = False
    """Try the create before reading: one request when the object is most likely new (an
    Instance's headless Service on its first run); an existing one is read and applied as usual."""


class ApplyObjectResult(_Op):
    ref: ObjectRef
    action: Literal["created", "updated", "unchanged", "superseded"]
    resource_version: str = ""
    generation: int | None = None


class PatchObjectInput(_Op):
    """Patch an object. `resource_version` makes the patch conditional (409 if stale)."""

    ref: ObjectRef
    patch: dict[str, Any] | list[dict[str, Any]]
    patch_type: Literal["merge", "strategic", "json"] = "merge"
    resource_version: str | None = None
    missing_ok: bool = False


class PatchStatusInput(_Op):
    """Merge-patch the `status` subresource: the projection kubectl users read."""

    ref: ObjectRef
    status: dict[str, Any]
    resource_version: str | None = None
    missing_ok: bool = False


class PatchObjectResult(_Op):
    found: bool = True
    resource_version: str = ""
    generation: int | None = None


class DeleteObjectInput(_Op):
    ref: ObjectRef
    propagation_policy: Literal["Background", "Foreground", "Orphan"] = "Background"
    grace_period_seconds: int | None = Field(default=None, ge=0)
    release_finalizer: str | None = None
    """Remove this finalizer of ours first, so the object goes once the delete is sent."""


class DeleteObjectResult(_Op):
    deleted: bool  # False: it was already gone (or the uid no longer matched)


class ReadObjectInput(_Op):
    ref: ObjectRef
    missing_ok: bool = True


class ReadObjectResult(_Op):
    found: bool
    object: dict[str, Any] | None = None


class ListObjectsInput(_Op):
    api_version: str
    kind: str
    plural: str | None = None
    namespace: str | None = None
    label_selector: str = ""


class ListObjectsResult(_Op):
    items: list[dict[str, Any]] = Field(default_factory=list)
    resource_version: str = ""


class RecordEventInput(_Op):
    """A core/v1 Event on `involved`. Repeats (same object, type, reason, message) bump the
    existing Event's count and lastTimestamp, the way `kubectl describe` shows `(x3 over 5m)`."""

    involved: ObjectRef
    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Normal"
    action: str = ""
    occurrence: str | None = None
    """Which recording this is (`workflows.events.occurrence`): the same again (an attempt
    repeated after a worker died, or a retried activity) finds it on the Event and counts once."""


EVENT_OCCURRENCE_ANNOTATION = "ome.io/event-occurrence"
"""On an Event: the `occurrence` of the recording that last wrote it."""


class RecordEventResult(_Op):
    name: str
    count: int


class CrdExistsInput(_Op):
    name: str = PODGROUP_CRD


class CrdExistsResult(_Op):
    exists: bool
    established: bool = False
    served_versions: list[str] = Field(default_factory=list)


# --- nodes: cordon (through `patch_object`), the pods on a node, eviction --------------------


class ListNodePodsInput(_Op):
    """The node and every pod bound to it (field selector `spec.nodeName`), all namespaces."""

    node: str


class NodePod(_Op):
    """One pod on a node, reduced to what a drain decides on."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str] = Field(default_factory=dict)
    """Only the product's `ome.io/*` labels."""
    phase: str = ""
    terminating: bool = False
    owner_kind: str = ""
    """The controller owner's kind (`ReplicaSet`, `DaemonSet`, ...); '' for a bare or mirror pod."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class NodePods(_Op):
    found: bool
    """False: no node of that name (nothing else is filled in)."""
    unschedulable: bool = False
    ready: bool = True
    """The node's Ready condition is True (a failed node's pods never finish terminating)."""
    pods: list[NodePod] = Field(default_factory=list)


class EvictPodInput(_Op):
    """Evict one pod through the Eviction API (policy/v1), as `kubectl drain` does. `uid`
    guards against evicting a new pod that took the name."""

    namespace: str
    name: str
    uid: str | None = None


class EvictPodResult(_Op):
    outcome: Literal["evicted", "gone", "blocked"]
    """`blocked`: a PodDisruptionBudget allows no disruption now (HTTP 429); try again later."""
    message: str = ""
    """For `blocked`: `blocked by PDB <name>: <the API server's message>`."""


ACTIVITY_TYPES: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    KUBE_CREATE_PODS: (CreatePodsInput, CreatePodsResult),
    KUBE_DELETE_PODS: (DeletePodsInput, DeletePodsResult),
    KUBE_FORCE_DELETE_POD: (ForceDeletePodInput, DeletePodsResult),
    KUBE_SET_SERVING: (SetServingInput, SetServingResult),
    KUBE_LIST_INSTANCE_PODS: (ListInstancePodsInput, InstancePods),
    KUBE_LIST_COMPONENT_PODS: (ListComponentPodsInput, ComponentPods),
    KUBE_PODS_GONE: (PodsGoneInput, PodsGoneResult),
    KUBE_APPLY_OBJECT: (ApplyObjectInput, ApplyObjectResult),
    KUBE_PATCH_OBJECT: (PatchObjectInput, PatchObjectResult),
    KUBE_PATCH_STATUS: (PatchStatusInput, PatchObjectResult),
    KUBE_DELETE_OBJECT: (DeleteObjectInput, DeleteObjectResult),
    KUBE_READ_OBJECT: (ReadObjectInput, ReadObjectResult),
    KUBE_LIST_OBJECTS: (ListObjectsInput, ListObjectsResult),
    KUBE_RECORD_EVENT: (RecordEventInput, RecordEventResult),
    KUBE_CRD_EXISTS: (CrdExistsInput, CrdExistsResult),
    KUBE_LIST_NODE_PODS: (ListNodePodsInput, NodePods),
    KUBE_EVICT_POD: (EvictPodInput, EvictPodResult),
}
"""Input and result model of each activity name: the contract test checks both sides."""
