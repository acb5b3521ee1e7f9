"""The cluster's inference gateway: where a multi-cluster control plane reaches the
InferenceServices this cluster serves, to read their capacity (§18) and probe their health (§19).

A kubesim started with a gateway port also listens there (plain HTTP on 127.0.0.1) and describes
itself as the Gateway `ome/inference-gateway` (`status.addresses[0].value` 127.0.0.1, listener
port the gateway port). The endpoint of InferenceService `ns/name` is
`http://127.0.0.1:<port>/<ns>/<name>`:

    GET|POST <endpoint>/capacity  (any path under it ending in /capacity)
        {"servable": N, "observedAt": "<RFC3339 now>"}: N counts the InferenceService's serving
        engine pods (Ready, in rotation, not terminating; `kubesim.engines.traffic.is_serving`),
        for prefill-decode the lower of the engine and decoder counts
    any other method or path under <endpoint>
        the health probe: 200 when N > 0, else 503

Faults bend one InferenceService's answers for one target (`probe` or `capacity`), until
cleared: a status code, a body, a delay before answering, a closed connection instead of an
answer, and for capacity reports the servable count or the observedAt stamp reported. The
control API sets them (`POST /kubesim/gateway/faults`, `kubesim.control`), and so does the
Python handle.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass, fields
from typing import Any

from aiohttp import web

from kubesim.controllers.gateways import CONTROLLER_NAME, GATEWAY_GROUP
from kubesim.engines.traffic import LABEL_COMPONENT, LABEL_ISVC, PODS, engine_labels, is_serving
from kubesim.errors import ApiError
from kubesim.store import Store
from kubesim.timing import timestamp

log = logging.getLogger("kubesim.gateway")
GATEWAY_NAMESPACE = "ome"
GATEWAY_NAME = "inference-gateway"
GATEWAY_CLASS = "kubesim"
GATEWAY_API = f"{GATEWAY_GROUP}/v1"
TARGETS = ("probe", "capacity")
ISVCS = ("ome.io", "inferenceservices")
ENGINE, DECODER = "engine", "decoder"


@dataclass(frozen=True)
class GatewayFault:
    """How one InferenceService's probe or capacity answers are bent (None: as usual)."""

    status: int | None = None
    body: str | None = None
    delaySeconds: float | None = None  # noqa: N815 - the control API's JSON field names
    servable: int | None = None
    observedAt: str | None = None  # noqa: N815
    close: bool = False

    @classmethod
    def parse(cls, settings: dict[str, Any]) -> GatewayFault:
        known = {f.name for f in fields(cls)}
        unknown = set(settings) - known
        if unknown:
            raise ApiError(400, f"unknown gateway fault settings {sorted(unknown)}: use {', '.join(sorted(known))}")
        status = settings.get("status")
        if status is not None and (not isinstance(status, int) or not 100 <= status <= 599):
            raise ApiError(400, f"gateway fault status must be an HTTP status code (100-599), got {status!r}")
        servable = settings.get("servable")
        if servable is not None and not isinstance(servable, int):
            raise ApiError(400, f"gateway fault servable must be an integer, got {servable!r}")
        delay = settings.get("delaySeconds")
        if delay is not None and (not isinstance(delay, int | float) or delay < 0):
            raise ApiError(400, f"gateway fault delaySeconds must be a number >= 0, got {delay!r}")
        return cls(**settings)


def fault_key(namespace: Any, name: Any, target: Any) -> tuple[str, str, str]:
    if not namespace or not name or target not in TARGETS:
        raise ApiError(400, 'a gateway fault names "namespace", "name" and "target" ("probe" or "capacity"), got '
                       f"namespace={namespace!r}, name={name!r}, target={target!r}")
    return str(namespace), str(name), str(target)


def servable(store: Store, namespace: str, name: str) -> int:
    """Serving engine pods of InferenceService `namespace/name`; with decoders (the
    InferenceService declares them, or decoder pods exist), the lower of the two counts."""
    counts = {ENGINE: 0, DECODER: 0}
    decoders = False
    for pod in store.list(PODS, namespace):
        labels = pod["metadata"].get("labels") or {}
        component = labels.get(LABEL_COMPONENT)
        if labels.get(LABEL_ISVC) != name or component not in counts:
            continue
        decoders = decoders or component == DECODER
        if engine_labels(pod) is not None and is_serving(pod):
            counts[component] += 1
    isvc = store.get(ISVCS, namespace, name)
    if isvc is not None and (isvc.get("spec") or {}).get(DECODER):
        decoders = True
    return min(counts.values()) if decoders else counts[ENGINE]


def gateway_objects(port: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The GatewayClass kubesim's controller owns and the Gateway describing the endpoint."""
    gateway_class = {
        "apiVersion": GATEWAY_API, "kind": "GatewayClass", "metadata": {"name": GATEWAY_CLASS},
        "spec": {"controllerName": CONTROLLER_NAME, "description": "kubesim's simulated inference gateway"},
    }
    gateway = {
        "apiVersion": GATEWAY_API, "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE,
                     "labels": {"app.kubernetes.io/managed-by": "kubesim"}},
        "spec": {"gatewayClassName": GATEWAY_CLASS,
                 "listeners": [{"name": "http", "port": port, "protocol": "HTTP",
                                "allowedRoutes": {"namespaces": {"from": "All"}}}]},
    }
    return gateway_class, gateway


class GatewayEndpoint:
    """The HTTP side of the inference gateway and its faults."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.faults: dict[tuple[str, str, str], GatewayFault] = {}
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self.dispatch)
        self.requests = 0

    # ---- faults ----------------------------------------------------------------------------

    def set_fault(self, namespace: str, name: str, target: str, **settings: Any) -> GatewayFault:
        fault = GatewayFault.parse(settings)
        self.faults[fault_key(namespace, name, target)] = fault
        return fault

    def clear_fault(self, namespace: str, name: str, target: str) -> bool:
        return self.faults.pop(fault_key(namespace, name, target), None) is not None

    def describe_faults(self) -> list[dict[str, Any]]:
        return [{"namespace": ns, "name": name, "target": target,
                 **{k: v for k, v in asdict(fault).items() if v is not None and v is not False}}
                for (ns, name, target), fault in sorted(self.faults.items())]

    # ---- answers ---------------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        parts = [p for p in request.path.split("/") if p]
        if len(parts) < 2:
            return web.json_response({"message": f"no InferenceService at {request.path}: use /<namespace>/<name>"},
                                     status=404)
        namespace, name = parts[0], parts[1]
        target = "capacity" if len(parts) > 2 and parts[-1] == "capacity" else "probe"
        if target == "capacity" and request.method not in ("GET", "POST"):
            return web.json_response({"message": "capacity reports answer GET and POST"}, status=405)
        fault = self.faults.get((namespace, name, target)) or GatewayFault()
        if fault.delaySeconds:
            await asyncio.sleep(fault.delaySeconds)
        if fault.close:
            # The connection goes without an answer, as from a gateway that crashed mid-request.
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=499)  # written nowhere: the transport is closed
        count = servable(self.store, namespace, name) if fault.servable is None else fault.servable
        if target == "capacity":
            status = fault.status or 200
            body = fault.body if fault.body is not None else json.dumps(
                {"servable": count, "observedAt": fault.observedAt or timestamp()})
        else:
            status = fault.status or (200 if count > 0 else 503)
            body = fault.body if fault.body is not None else json.dumps(
                {"inferenceservice": f"{namespace}/{name}", "servable": count})
        return web.Response(text=body, status=status, content_type="application/json")
