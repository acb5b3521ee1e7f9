"""Which InferenceServices a changed ServingRuntime or ClusterServingRuntime reaches.

An InferenceService names its runtime in `spec.runtime.name`. A namespaced ServingRuntime of
that name serves it; a ClusterServingRuntime of that name serves it only where its namespace
has no ServingRuntime of the name (the namespaced one shadows it). A change is a new
`metadata.generation` (spec edits; status and metadata writes do not count), a runtime that
appears, or one that goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from planning.controller.objects import identity, is_placement_copy, metadata_of

RuntimeKind = Literal["ServingRuntime", "ClusterServingRuntime"]
SERVING_RUNTIME: RuntimeKind = "ServingRuntime"
CLUSTER_SERVING_RUNTIME: RuntimeKind = "ClusterServingRuntime"


def runtime_name(isvc: dict[str, Any]) -> str | None:
    runtime = (isvc.get("spec") or {}).get("runtime")
    name = runtime.get("name") if isinstance(runtime, dict) else None
    return str(name) if name else None


def generation_changed(previous: int | None, current: dict[str, Any] | None) -> bool:
    """`previous` is the generation last seen (None: not seen), `current` the object (None: gone)."""
    if current is None:
        return previous is not None
    generation = metadata_of(current).get("generation")
    return previous is None or generation != previous


def runtime_users(
    kind: RuntimeKind,
    namespace: str | None,
    name: str,
    isvcs: Iterable[dict[str, Any]],
    serving_runtimes: set[tuple[str, str]],
) -> list[tuple[str, str]]:
    """(namespace, name) of the InferenceServices served by the runtime; `serving_runtimes`
    are the (namespace, name) of the ServingRuntimes that exist. Member copies are their
    placement source's concern."""
    users = []
    for isvc in isvcs:
        if is_placement_copy(isvc) or runtime_name(isvc) != name:
            continue
        isvc_namespace, isvc_name = identity(isvc)
        if kind == SERVING_RUNTIME:
            served = isvc_namespace == namespace
        else:
            served = (isvc_namespace, name) not in serving_runtimes
        if served:
            users.append((isvc_namespace, isvc_name))
    return sorted(users)
