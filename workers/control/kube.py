"""The controller's Kubernetes side: JSON patches of its own objects and Warning Events, through
the worker's object activities called directly (`activities.kube_objects.ObjectActivities`), so
they share its preconditions, error translation and Event aggregation."""

from __future__ import annotations

import asyncio
import logging
from enum import StrEnum
from typing import Any

from kubernetes.client import ApiClient
from temporalio.exceptions import ApplicationError

from activities.kube_objects import ObjectActivities
from models.kube_ops import KubeErrorType, ObjectRef, PatchObjectInput, RecordEventInput
from planning.controller.objects import Op, identity, uid_of
from planning.objects import OME_API_VERSION

logger = logging.getLogger("workers.controller")


class Patched(StrEnum):
    DONE = "done"
    STALE = "stale"
    """A `test` failed: the object changed since it was read; its next watch event re-decides."""
    GONE = "gone"


def ref_of(obj: dict[str, Any]) -> ObjectRef:
    namespace, name = identity(obj)
    return ObjectRef(
        api_version=str(obj.get("apiVersion") or OME_API_VERSION),
        kind=str(obj.get("kind") or "InferenceService"),
        name=name,
        namespace=namespace,
        uid=uid_of(obj) or None,
    )


class KubeWriter:
    """Patches and Events, run on threads (the Kubernetes client is synchronous)."""

    def __init__(self, api_client: ApiClient) -> None:
        self.objects = ObjectActivities(api_client)

    async def patch(self, obj: dict[str, Any], ops: list[Op]) -> Patched:
        """Apply a guarded JSON patch; other failures raise (transient: retried)."""
        request = PatchObjectInput(ref=ref_of(obj), patch=ops, patch_type="json")
        try:
            await asyncio.to_thread(self.objects.patch_object, request)
        except ApplicationError as error:
            if error.type == KubeErrorType.INVALID.value:
                return Patched.STALE
            if error.type == KubeErrorType.NOT_FOUND.value:
                return Patched.GONE
            raise
        return Patched.DONE

    async def warning(self, obj: dict[str, Any], reason: str, message: str) -> None:
        """A Warning Event on `obj`; a failure to write it is logged, never retried (the
        request it reports must not be resent for it)."""
        request = RecordEventInput(involved=ref_of(obj), reason=reason, message=message, type="Warning")
        try:
            await asyncio.to_thread(self.objects.record_event, request)
        except Exception as error:
            logger.warning("event %s on %s/%s not written: %s", reason, *identity(obj), str(error)[:300])
