"""Typed workflow-side calls of the Kubernetes activities.

One async function per activity: it fixes the registered name, the input and result
models, the timeouts and the retry policy, and passes the caller's `summary` to the
Temporal UI, so a history reads "create 4 pods for chat-engine-1 (revision 7c9e),
incarnation 2" rather than "kube.create_pods". Workflows import this module (inside
`workflow.unsafe.imports_passed_through()`); it imports only temporalio and models.

Retries: transient failures (409 on a stale resourceVersion, 429, 5xx, connection errors)
retry with backoff for as long as the optional `schedule_to_close` allows (forever by
default: an unreachable API server parks the workflow, it does not fail it). Failures the
activity marks non-retryable (Invalid, Forbidden, QuotaExceeded, NotFound, NameTaken)
surface at once as an `ActivityError` whose cause is the `ApplicationError`;
`error_type(err)` reads its type.

Local variants (`local=True`): the short idempotent calls an Instance makes run as local
activities, in the worker that runs the workflow task: one marker in history instead of three
events and a workflow task, and no round trip through the server. Same names, models, retry
policy (non-retryable types surface the same way) and timeouts; a local attempt cannot
heartbeat, so a batch is bounded by its start-to-close alone. Retries past
`LOCAL_RETRY_THRESHOLD` wait on a workflow timer, as the SDK does for every local activity.
Callers switch behind a `workflow.patched` id of their own, decided once per run.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import TypeVar

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

from models.kube_ops import (
    KUBE_APPLY_OBJECT,
    KUBE_CRD_EXISTS,
    KUBE_CREATE_PODS,
    KUBE_DELETE_OBJECT,
    KUBE_DELETE_PODS,
    KUBE_EVICT_POD,
    KUBE_FORCE_DELETE_POD,
    KUBE_LIST_COMPONENT_PODS,
    KUBE_LIST_INSTANCE_PODS,
    KUBE_LIST_NODE_PODS,
    KUBE_LIST_OBJECTS,
    KUBE_PATCH_OBJECT,
    KUBE_PATCH_STATUS,
    KUBE_PODS_GONE,
    KUBE_READ_OBJECT,
    KUBE_RECORD_EVENT,
    KUBE_SET_SERVING,
    NON_RETRYABLE_ERRORS,
    ApplyObjectInput,
    ApplyObjectResult,
    ComponentPods,
    CrdExistsInput,
    CrdExistsResult,
    CreatePodsInput,
    CreatePodsResult,
    DeleteObjectInput,
    DeleteObjectResult,
    DeletePodsInput,
    DeletePodsResult,
    EvictPodInput,
    EvictPodResult,
    ForceDeletePodInput,
    ListComponentPodsInput,
    ListInstancePodsInput,
    ListNodePodsInput,
    ListObjectsInput,
    ListObjectsResult,
    NodePods,
    PatchObjectInput,
    PatchObjectResult,
    PatchStatusInput,
    PodsGoneInput,
    PodsGoneResult,
    ReadObjectInput,
    ReadObjectResult,
    RecordEventInput,
    RecordEventResult,
    SetServingInput,
    SetServingResult,
)
from models.pods import InstancePods

Result = TypeVar("Result", bound=BaseModel)

NON_RETRYABLE_TYPES = [error.value for error in NON_RETRYABLE_ERRORS]

# Backoff starts fast (a 409 race resolves on the next read) and settles at a minute, the
# pace at which an outage is worth re-probing without flooding a recovering API server.
KUBE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=0,
    non_retryable_error_types=NON_RETRYABLE_TYPES,
)
# One request; the client's own read timeout is shorter, so this only catches a hung worker.
SINGLE_CALL_TIMEOUT = timedelta(seconds=60)
# Batches loop over pods and heartbeat between them.
BATCH_TIMEOUT = timedelta(minutes=5)
KUBE_HEARTBEAT = timedelta(seconds=15)
"""Every regular Kubernetes activity heartbeats, between its requests and while one waits
(`activities.keep_alive`): an attempt whose worker died is retried after this long, not after
its start-to-close timeout. Histories from before scheduled batches with 90 s and single calls
with none; a heartbeat timeout is not part of what a replay compares."""


# A local attempt's backoff longer than this waits on a workflow timer instead of in the worker.
LOCAL_RETRY_THRESHOLD = timedelta(seconds=10)
# A local attempt's cap: one that runs longer holds the workflow task open, heartbeating it into
# history every ~8 s; a batch that needs longer is retried (its calls are idempotent).
LOCAL_CALL_TIMEOUT = timedelta(seconds=30)
# How long a call keeps retrying locally before it is re-issued as a regular activity: in an API
# brownout the server's retry timers then wait, instead of workflow-task heartbeats and local
# retry timers that each add history.
LOCAL_GIVE_UP = timedelta(minutes=2)


def error_type(error: BaseException) -> str | None:
    """The `KubeErrorType` value of a failed activity call, or None for other failures."""
    cause = error.cause if isinstance(error, ActivityError) else error
    if isinstance(cause, ApplicationError):
        return cause.type
    return None


def _retry(surface: tuple[str, ...]) -> RetryPolicy:
    """`KUBE_RETRY`, with the error types `surface` (retryable elsewhere) surfacing at once too."""
    if not surface:
        return KUBE_RETRY
    return dataclasses.replace(KUBE_RETRY, non_retryable_error_types=[*NON_RETRYABLE_TYPES, *surface])


async def _call(
    name: str,
    arg: BaseModel,
    result_type: type[Result],
    summary: str,
    *,
    batch: bool = False,
    schedule_to_close: timedelta | None = None,
    local: bool = False,
    surface: tuple[str, ...] = (),
) -> Result:
    retry_policy = _retry(surface)
    if local:
        give_up = LOCAL_GIVE_UP if schedule_to_close is None else min(schedule_to_close, LOCAL_GIVE_UP)
        try:
            local_result: Result = await workflow.execute_local_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=min(BATCH_TIMEOUT if batch else SINGLE_CALL_TIMEOUT, LOCAL_CALL_TIMEOUT),
                schedule_to_close_timeout=give_up,
                retry_policy=retry_policy,
                local_retry_threshold=LOCAL_RETRY_THRESHOLD,
                summary=summary,
            )
            return local_result
        except ActivityError as error:
            # A local activity that ran out of time (`give_up`) arrives wrapped.
            if not isinstance(error.cause, TimeoutError) or give_up == schedule_to_close:
                raise
        except (ApplicationError, TimeoutError) as error:
            # A local activity's failure arrives bare; callers catch `ActivityError` (and
            # read its cause with `error_type`) whichever way the call ran.
            raise ActivityError(
                f"local activity {name} failed",
                scheduled_event_id=0,
                started_event_id=0,
                identity="",
                activity_type=name,
                activity_id="",
                retry_state=None,
            ) from error
        # Still failing after `LOCAL_GIVE_UP`: carry on as a regular activity for the rest.
        if schedule_to_close is not None:
            schedule_to_close -= give_up
    result: Result = await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=BATCH_TIMEOUT if batch else SINGLE_CALL_TIMEOUT,
        heartbeat_timeout=KUBE_HEARTBEAT,
        schedule_to_close_timeout=schedule_to_close,
        retry_policy=retry_policy,
        summary=summary,
    )
    return result


async def create_pods(
    arg: CreatePodsInput,
    *,
    summary: str,
    schedule_to_close: timedelta | None = None,
    local: bool = False,
    surface: tuple[str, ...] = (),
) -> CreatePodsResult:
    """`surface`: error types the caller handles itself (an Instance waits on `QuotaNotCounted`
    as on `QuotaExceeded`) rather than have them retried."""
    return await _call(
        KUBE_CREATE_PODS,
        arg,
        CreatePodsResult,
        summary,
        batch=True,
        schedule_to_close=schedule_to_close,
        local=local,
        surface=surface,
    )


async def delete_pods(
    arg: DeletePodsInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> DeletePodsResult:
    return await _call(
        KUBE_DELETE_PODS,
        arg,
        DeletePodsResult,
        summary,
        batch=True,
        schedule_to_close=schedule_to_close,
        local=local,
    )


async def force_delete_pod(
    arg: ForceDeletePodInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> DeletePodsResult:
    return await _call(
        KUBE_FORCE_DELETE_POD,
        arg,
        DeletePodsResult,
        summary,
        schedule_to_close=schedule_to_close,
        local=local,
    )


async def set_serving(
    arg: SetServingInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> SetServingResult:
    return await _call(
        KUBE_SET_SERVING,
        arg,
        SetServingResult,
        summary,
        batch=True,
        schedule_to_close=schedule_to_close,
        local=local,
    )


async def list_instance_pods(
    arg: ListInstancePodsInput,
    *,
    summary: str,
    schedule_to_close: timedelta | None = None,
    local: bool = False,
) -> InstancePods:
    return await _call(
        KUBE_LIST_INSTANCE_PODS, arg, InstancePods, summary, schedule_to_close=schedule_to_close, local=local
    )


async def list_component_pods(
    arg: ListComponentPodsInput,
    *,
    summary: str,
    schedule_to_close: timedelta | None = None,
    local: bool = False,
) -> ComponentPods:
    return await _call(
        KUBE_LIST_COMPONENT_PODS, arg, ComponentPods, summary, schedule_to_close=schedule_to_close, local=local
    )


async def pods_gone(
    arg: PodsGoneInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> PodsGoneResult:
    return await _call(
        KUBE_PODS_GONE, arg, PodsGoneResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def apply_object(
    arg: ApplyObjectInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> ApplyObjectResult:
    return await _call(
        KUBE_APPLY_OBJECT, arg, ApplyObjectResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def patch_object(
    arg: PatchObjectInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> PatchObjectResult:
    return await _call(
        KUBE_PATCH_OBJECT, arg, PatchObjectResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def patch_status(
    arg: PatchStatusInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> PatchObjectResult:
    return await _call(
        KUBE_PATCH_STATUS, arg, PatchObjectResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def delete_object(
    arg: DeleteObjectInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> DeleteObjectResult:
    return await _call(
        KUBE_DELETE_OBJECT, arg, DeleteObjectResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def read_object(
    arg: ReadObjectInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> ReadObjectResult:
    return await _call(
        KUBE_READ_OBJECT, arg, ReadObjectResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def list_objects(
    arg: ListObjectsInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> ListObjectsResult:
    return await _call(
        KUBE_LIST_OBJECTS, arg, ListObjectsResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def record_event(
    arg: RecordEventInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> RecordEventResult:
    return await _call(
        KUBE_RECORD_EVENT, arg, RecordEventResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def crd_exists(
    arg: CrdExistsInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> CrdExistsResult:
    return await _call(
        KUBE_CRD_EXISTS, arg, CrdExistsResult, summary, schedule_to_close=schedule_to_close, local=local
    )


async def list_node_pods(
    arg: ListNodePodsInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> NodePods:
    return await _call(
        KUBE_LIST_NODE_PODS, arg, NodePods, summary, schedule_to_close=schedule_to_close, local=local
    )


async def evict_pod(
    arg: EvictPodInput, *, summary: str, schedule_to_close: timedelta | None = None, local: bool = False
) -> EvictPodResult:
    return await _call(
        KUBE_EVICT_POD, arg, EvictPodResult, summary, schedule_to_close=schedule_to_close, local=local
    )
