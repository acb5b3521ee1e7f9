"""Deleting an InferenceService: the product's finalizer `ome.io/isvc-teardown` holds the object
while its workflow drains and removes what it owns (on the `delete` signal); the workflow then
removes the finalizer itself. Where no workflow runs for the object, nothing would ever remove
it, so the controller does (`release_finalizer`). The `delete` signal names the object's uid
(`delete_payload`)."""

from __future__ import annotations

from typing import Any

from planning.controller.objects import Op, is_deleting, metadata_of
from planning.objects import finalizer_release_patch
from planning.service.relay import ISVC_FINALIZER


def holds_finalizer(obj: dict[str, Any]) -> bool:
    return ISVC_FINALIZER in (metadata_of(obj).get("finalizers") or [])


def wants_delete_signal(obj: dict[str, Any]) -> bool:
    """A deleting object the product's finalizer holds: its workflow must tear it down."""
    return is_deleting(obj) and holds_finalizer(obj)


def gone_wants_delete_signal(obj: dict[str, Any], *, seen_finalizer: bool = False) -> bool:
    """An object deleted without the product's finalizer (never written by the workflow, or
    the finalizer removed by hand): a running workflow still has to tear down what it owns.

    Not when this object (uid) was seen carrying the finalizer before (`seen_finalizer`): the
    workflow removes it itself once it has torn down, so it is tearing down or done, and the
    workflow ID may belong to a new run for a new object of the same name by now."""
    return not holds_finalizer(obj) and not seen_finalizer


def delete_payload(obj: dict[str, Any]) -> dict[str, str]:
    """The `delete` signal's input: the uid of the object being deleted, so that a workflow
    run that owns another object of that name ignores it."""
    return {"uid": str(metadata_of(obj).get("uid") or "")}


def release_finalizer(obj: dict[str, Any]) -> list[Op]:
    """JSON patch removing the product's finalizer, only from this object (uid) and only at
    the index where it was seen; [] when it does not hold it."""
    return finalizer_release_patch(obj, ISVC_FINALIZER)
