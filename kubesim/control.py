"""The control API under `/sim/` (and the same under `/kubesim/`): what the Python handle can do, over HTTP as JSON, for
processes that only have the cluster's URL (the e2e stack, benchmarks, a person with curl).
`kubectl` reaches it through the kubeconfig: `kubectl get --raw /sim/traffic`, and a POST as
`kubectl create --raw /sim/traffic/images -f settings.json` (the file's JSON is the body).

    GET  /sim/counters                      requests by verb and resource, faults injected
    POST /sim/counters/reset
    POST /sim/nodes/{name}/{fail|restore|stall|unstall|cordon|uncordon|drain}
                                            (stall: Ready, but new pods wait in ContainerCreating)
    POST /sim/pods/{namespace}/{name}/kill
    POST /sim/images        {"image": ..., "pull_seconds": ..., "fail_pull": ..., "crash": ...,
                             "stop_seconds": ... (SIGTERM to exit; negative = ignores SIGTERM)}
    POST /sim/timing        {"pull_seconds": ..., "start_seconds": ..., "ready_seconds": ..., "factor": ...,
                             "stop_seconds": ...}
    POST /sim/faults        {"error_rate": ..., "codes": [...], "latency_seconds": ..., "watch_cut_seconds": ...}
    GET  /sim/traffic       the simulated engines' settings and, per component, the pods serving it
    POST /sim/traffic/rate  {"requests_per_second": ...} for the cluster, or with "namespace" and
                            "inferenceservice" for one InferenceService (null: back to the cluster's)
    POST /sim/traffic/images {"image": ..., "error_ratio": ..., "ttft_seconds": ...} (an image, its
                            repository, or a prefix ending in "*"; an omitted setting takes its
                            default, neither: the image is back to the defaults; kubesim.engines)
    GET  /sim/gateway/faults the inference gateway's faults (kubesim.gateway)
    POST /sim/gateway/faults {"namespace": ..., "name": ..., "target": "probe"|"capacity", "status": int,
                            "body": str, "delaySeconds": float, "close": bool, "servable": int,
                            "observedAt": str} (every setting optional; replaces that target's fault)
    DELETE /sim/gateway/faults {"namespace": ..., "name": ..., "target": ...} (or as query parameters)
    POST /sim/compact       forget the watch history (watches from older versions get 410)
    POST /sim/save          write the state file now
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from kubesim.engines.traffic import Traffic
from kubesim.errors import ApiError
from kubesim.faults import Faults
from kubesim.gateway import GatewayEndpoint
from kubesim.store import Object, Store
from kubesim.timing import Timing

_IMAGE_FIELDS = ("pull_seconds", "start_seconds", "ready_seconds", "fail_pull", "crash", "unready_after_seconds",
                 "stop_seconds")

_TIMING_FIELDS = ("pull_seconds", "start_seconds", "ready_seconds", "factor", "stop_seconds")

_RATE_FIELDS = ("requests_per_second", "namespace", "inferenceservice")

_ENGINE_FIELDS = ("image", "error_ratio", "ttft_seconds")


def _json(data: Any, status: int = 200) -> web.Response:
    # One line ending in a newline, so `curl` and `kubectl create --raw` leave the prompt on its own line.
    return web.Response(text=json.dumps(data) + "\n", status=status, content_type="application/json")


class Operations(Protocol):
    """What the control API drives: the cluster's operations and the parts it reports on."""

    faults: Faults
    timing: Timing
    traffic: Traffic
    gateway: GatewayEndpoint
    store: Store
    state_file: Path | None

    def fail_node(self, name: str) -> Object: ...
    def restore_node(self, name: str) -> Object: ...
    def stall_node(self, name: str, stalled: bool = True) -> Object: ...
    def cordon_node(self, name: str, unschedulable: bool = True) -> Object: ...
    def drain_node(self, name: str) -> dict[str, list[str]]: ...
    def kill_pod(self, namespace: str, name: str) -> bool: ...
    def set_image_behavior(self, image: str, **settings: Any) -> None: ...
    def set_default_timing(self, **settings: float | None) -> None: ...
    def save(self) -> None: ...


class Control:
    def __init__(self, operations: Operations) -> None:
        self.operations = operations

    async def handle(self, request: web.Request, path: str) -> web.Response:
        parts = path.strip("/").split("/")[1:]
        method = request.method
        body: dict[str, Any] = {}
        if method in ("POST", "PUT", "DELETE"):
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else {}
            except ValueError as exc:
                raise ApiError(400, f"control request body must be JSON: {exc}") from exc
        c = self.operations
        if parts == ["counters"] and method == "GET":
            return _json(c.faults.counters_json())
        if parts == ["counters", "reset"] and method == "POST":
            c.faults.reset_counters()
            return _json({"reset": True})
        if len(parts) == 3 and parts[0] == "nodes" and method == "POST":
            name, action = parts[1], parts[2]
            actions: dict[str, Callable[[], Any]] = {
                "fail": lambda: c.fail_node(name),
                "restore": lambda: c.restore_node(name),
                "stall": lambda: c.stall_node(name),
                "unstall": lambda: c.stall_node(name, stalled=False),
                "cordon": lambda: c.cordon_node(name),
                "uncordon": lambda: c.cordon_node(name, unschedulable=False),
                "drain": lambda: c.drain_node(name),
            }
            if action not in actions:
                raise ApiError(404, f"unknown node action {action!r}: use fail, restore, stall, unstall, cordon, uncordon or drain")
            return _json(actions[action]())
        if len(parts) == 4 and parts[0] == "pods" and parts[3] == "kill" and method == "POST":
            return _json({"killed": c.kill_pod(parts[1], parts[2])})
        if parts == ["images"] and method in ("POST", "PUT"):
            image = body.get("image")
            if not image:
                raise ApiError(400, 'POST /sim/images needs "image", e.g. {"image": "vllm:0.6", "crash": true}')
            unknown = set(body) - set(_IMAGE_FIELDS) - {"image"}
            if unknown:
                raise ApiError(400, f"unknown image settings {sorted(unknown)}: use {', '.join(_IMAGE_FIELDS)}")
            c.set_image_behavior(image, **{k: body[k] for k in _IMAGE_FIELDS if k in body})
            return _json({"image": image})
        if parts == ["timing"] and method in ("POST", "PUT"):
            unknown = set(body) - set(_TIMING_FIELDS)
            if unknown:
                raise ApiError(400, f"unknown timing settings {sorted(unknown)}: use {', '.join(_TIMING_FIELDS)}")
            c.set_default_timing(**body)
            t = c.timing
            return _json({"pull_seconds": t.pull_seconds, "start_seconds": t.start_seconds,
                          "ready_seconds": t.ready_seconds, "factor": t.factor, "stop_seconds": t.stop_seconds})
        if parts == ["faults"] and method in ("POST", "PUT"):
            unknown = set(body) - {"error_rate", "codes", "latency_seconds", "watch_cut_seconds"}
            if unknown:
                raise ApiError(400, f"unknown fault settings {sorted(unknown)}: use error_rate, codes, "
                               "latency_seconds, watch_cut_seconds")
            c.faults.configure(**body)
            return _json({"faults": vars(c.faults.settings)})
        if parts == ["gateway", "faults"]:
            return self._gateway_faults(method, {**request.query, **body} if isinstance(body, dict) else body)
        if parts[:1] == ["traffic"]:
            return self._traffic(parts[1:], method, body)
        if parts == ["compact"] and method == "POST":
            c.store.compact()
            return _json({"compactedResourceVersion": str(c.store.compacted_rv)})
        if parts == ["save"] and method == "POST":
            c.save()
            return _json({"saved": str(c.state_file) if c.state_file else None})
        raise ApiError(404, f"unknown control path {method} {path}; see the kubesim.control module docstring")

    def _gateway_faults(self, method: str, body: Any) -> web.Response:
        gateway = self.operations.gateway
        if not isinstance(body, dict):
            raise ApiError(400, f"a /sim/gateway/faults request body must be a JSON object, got {type(body).__name__}")
        if method == "GET":
            return _json({"faults": gateway.describe_faults()})
        where = {key: body.pop(key, None) for key in ("namespace", "name", "target")}
        if method in ("POST", "PUT"):
            gateway.set_fault(where["namespace"], where["name"], where["target"], **body)
            return _json({"faults": gateway.describe_faults()})
        if method == "DELETE":
            cleared = gateway.clear_fault(where["namespace"], where["name"], where["target"])
            return _json({"cleared": cleared, "faults": gateway.describe_faults()})
        raise ApiError(405, f"{method} /sim/gateway/faults is not supported: use GET, POST or DELETE")

    def _traffic(self, parts: list[str], method: str, body: dict[str, Any]) -> web.Response:
        traffic = self.operations.traffic
        if not isinstance(body, dict):
            raise ApiError(400, f"a /sim/traffic request body must be a JSON object, got {type(body).__name__}")
        if parts == [] and method == "GET":
            return _json(traffic.describe())
        if parts == ["rate"] and method in ("POST", "PUT"):
            unknown = set(body) - set(_RATE_FIELDS)
            if unknown or "requests_per_second" not in body:
                raise ApiError(400, f"POST /sim/traffic/rate takes {', '.join(_RATE_FIELDS)} (requests_per_second "
                               f"required), got {sorted(body)}: e.g. {{\"requests_per_second\": 50}}")
            traffic.set_rate(body["requests_per_second"], body.get("namespace"), body.get("inferenceservice"))
            return _json(traffic.describe())
        if parts == ["images"] and method in ("POST", "PUT"):
            unknown = set(body) - set(_ENGINE_FIELDS)
            if unknown or "image" not in body:
                raise ApiError(400, f"POST /sim/traffic/images takes {', '.join(_ENGINE_FIELDS)} (image required), "
                               f"got {sorted(body)}: e.g. {{\"image\": \"vllm:bad\", \"error_ratio\": 0.2}}")
            traffic.set_behavior(body["image"], body.get("error_ratio"), body.get("ttft_seconds"))
            return _json(traffic.describe())
        raise ApiError(404, f"unknown control path {method} /sim/traffic/{'/'.join(parts)}: use GET /sim/traffic, "
                       "POST /sim/traffic/rate or POST /sim/traffic/images")
