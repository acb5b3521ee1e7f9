"""When a new pod may carry the `ome.io/serving` gate from its creation.

The gate is the Instance's word that a pod may take traffic: Serving = ready and the gate True
(spec reference §9). A multi-pod Instance writes it only once every pod is ready (its leader
must not serve before its workers), and an Instance with `minReadySeconds` only once its pods
stayed ready that long; those see their pods ready first, then write the gate. A single-pod
Instance with no `minReadySeconds` waits for nothing but its one pod's readiness, which the
kubelet already folds into the pod's Ready condition: its pod is created with the gate True and
serves the moment its containers are ready, without a watcher signal, a workflow task and a
gate write on the way (issue 17). Never while the Instance drains.
"""

from __future__ import annotations

from models.instance import InstanceSpec

REASON = "ServeWhenReady"
"""The gate's reason on a pod created with it."""


def serves_when_ready(spec: InstanceSpec, draining: bool) -> bool:
    """Whether the Instance's new pods are created with the gate True."""
    return spec.pod_count == 1 and not spec.min_ready_seconds and not draining


def message(spec: InstanceSpec) -> str:
    """The gate's message on a pod created with it."""
    return f"Instance {spec.instance_name} has one pod and no minReadySeconds: it serves once ready"
