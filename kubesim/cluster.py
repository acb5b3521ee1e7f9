"""The composition root of one simulated cluster: it builds the store, the API semantics, the
HTTP server and the controllers, handing each only what it uses (the API, the timing, the
faults), bootstraps them from a topology (or restores a state file), and offers the operations
the control API and the Python handle drive (fail a node, kill a pod, change image behaviour,
the simulated engines' traffic).

Nothing in kubesim imports this module but the entry points (`kubesim.handle`,
`kubesim.__main__`); an import-linter contract in pyproject.toml keeps it so.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kubesim import persist
from kubesim.api import CRD_KEY, Api
from kubesim.control import Control
from kubesim.controllers.base import Controller
from kubesim.controllers.disruption import DisruptionController
from kubesim.controllers.endpoints import EndpointsController
from kubesim.controllers.event_ttl import EventExpiry
from kubesim.controllers.gateways import GatewayController
from kubesim.controllers.gc import GarbageCollector, NamespaceController
from kubesim.controllers.kubelet import Kubelet
from kubesim.controllers.nodes import NodeLifecycle, drain_pass, healthy_conditions, unknown_conditions
from kubesim.controllers.quota import QuotaStatus
from kubesim.controllers.scheduling import Scheduling
from kubesim.controllers.workloads import Deployments, ReplicaSets
from kubesim.engines.traffic import PODS, Traffic
from kubesim.errors import ApiError
from kubesim.fastjson import clone
from kubesim.faults import Faults
from kubesim.gateway import GATEWAY_NAMESPACE, GatewayEndpoint, GatewayFault, gateway_objects
from kubesim.resources import Registry
from kubesim.server import Server
from kubesim.store import Object, Store
from kubesim.timing import ImageBehavior, Timing, timestamp
from kubesim.tls import Credentials, make_credentials
from kubesim.topology import Topology, build_nodes

log = logging.getLogger("kubesim")
CRD_DIR = Path(__file__).resolve().parent.parent / "deploy" / "crds"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
AUTOSAVE_SECONDS = 2.0


def crd_documents(which: str | None) -> list[Object]:
    """The CRDs to preload: "product" (deploy/crds/*.yaml and the Gateway API and Inference
    Extension CRDs of gateway/, which the product writes), "all" (also optional/), or none."""
    if not which:
        return []
    if which not in ("product", "all"):
        raise ValueError(f"crds={which!r} is not supported: use 'product', 'all' or None")
    files = sorted(CRD_DIR.glob("*.yaml")) + sorted((CRD_DIR / "gateway").glob("*.yaml"))
    if which == "all":
        files += sorted((CRD_DIR / "optional").glob("*.yaml"))
    docs: list[Object] = []
    for path in files:
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


class Cluster:
    """Everything one kubesim runs, driven from one asyncio event loop.

    As a stand-in for a remote workload cluster it serves HTTPS (`tls`: a CA made at start,
    `credentials.ca_pem` for the kubeconfig), refuses requests without `Authorization: Bearer
    <token>` (`token`), and with `gateway_port` (0: a free one) runs the inference gateway
    endpoint of `kubesim.gateway`.
    """

    def __init__(self, topology: str | Topology | None = None, timing: Timing | None = None,
                 crds: str | None = None, state_file: str | Path | None = None, tls: bool = False,
                 token: str | None = None, gateway_port: int | None = None) -> None:
        self.timing = timing or Timing()
        self.store = Store()
        self.registry = Registry()
        self.api = Api(self.store, self.registry, self.timing)
        self.faults = Faults()
        self.traffic = Traffic()
        self.control = Control(self)
        self.state_file = Path(state_file) if state_file else None
        self.topology = Topology.parse(topology) if isinstance(topology, str) else topology
        self.crds = crds
        self.server = Server(self.api, self.control, self.faults, self.traffic, token=token)
        self.credentials: Credentials | None = make_credentials() if tls else None
        self.token = token
        self.gateway = GatewayEndpoint(self.store)
        self._gateway_port = gateway_port
        self._gateway_runner: web.AppRunner | None = None
        self.gateway_port: int | None = None
        self.kubelet = Kubelet(self.api, self.timing)
        self.disruption = DisruptionController(self.api)
        self.node_lifecycle = NodeLifecycle(self.api, self.timing)
        self.event_expiry = EventExpiry(self.api)
        self.controllers: list[Controller] = [
            Scheduling(self.api, self.timing), self.kubelet, self.node_lifecycle, ReplicaSets(self.api), Deployments(self.api),
            EndpointsController(self.api), self.disruption, GarbageCollector(self.api), NamespaceController(self.api),
            GatewayController(self.api), self.event_expiry, QuotaStatus(self.api),
        ]
        self.api.eviction_check = self.disruption.sync
        self._runner: web.AppRunner | None = None
        self._autosave: asyncio.Task[None] | None = None
        self._saved_rv = -1
        self._written_rv = -1
        self._write_lock = threading.Lock()
        self.port = 0

    @property
    def url(self) -> str:
        """The API server's URL (https with `tls`), once started."""
        return f"{'https' if self.credentials else 'http'}://127.0.0.1:{self.port}"

    @property
    def gateway_url(self) -> str | None:
        """The inference gateway's base URL, when it runs: `<gateway_url>/<ns>/<name>` is an endpoint."""
        return f"http://127.0.0.1:{self.gateway_port}" if self.gateway_port is not None else None

    # ---- lifecycle -------------------------------------------------------------------------

    def bootstrap(self) -> None:
        data = persist.load(self.state_file) if self.state_file else None
        if data is not None:
            self.store.restore(data)
            self.api.restore_registry()
            self._saved_rv = self.store.rv
        for name in SYSTEM_NAMESPACES:
            if self.store.get(("", "namespaces"), "", name) is None:
                self.api.create(self.api.type_of("", "namespaces"), "", {"metadata": {"name": name}}, "kubesim")
        for crd in crd_documents(self.crds):
            if self.store.get(CRD_KEY, "", crd["metadata"]["name"]) is None:
                self.api.create(self.api.type_of(*CRD_KEY), "", crd, "kubesim")
        self._bootstrap_gateway_class()
        if data is None and self.topology is not None:
            nodes_rt = self.api.type_of("", "nodes")
            for node in build_nodes(self.topology, timestamp()):
                status = node.pop("status", None)
                created = self.api.create(nodes_rt, "", node, "kubelet")
                if status:
                    self.api.write_status(nodes_rt, created, status, "kubelet")

    def _bootstrap_gateway_class(self) -> None:
        if self.api.registry.get("gateway.networking.k8s.io", "gatewayclasses") is None:
            return
        gateway_class, _ = gateway_objects(0)
        if self.store.get(("gateway.networking.k8s.io", "gatewayclasses"), "", gateway_class["metadata"]["name"]) is None:
            self.api.create(self.api.type_of("gateway.networking.k8s.io", "gatewayclasses"), "", gateway_class, "kubesim")

    def _describe_gateway(self, port: int) -> None:
        """Create (or point at the new port) the Gateway `ome/inference-gateway`."""
        if self.api.registry.get("gateway.networking.k8s.io", "gateways") is None:
            raise ValueError("the inference gateway needs the Gateway API CRDs: start with crds='product' or 'all'")
        if self.store.get(("", "namespaces"), "", GATEWAY_NAMESPACE) is None:
            self.api.create(self.api.type_of("", "namespaces"), "", {"metadata": {"name": GATEWAY_NAMESPACE}}, "kubesim")
        rt = self.api.type_of("gateway.networking.k8s.io", "gateways")
        _, gateway = gateway_objects(port)
        meta = gateway["metadata"]
        existing = self.store.get(rt.key, meta["namespace"], meta["name"])
        if existing is None:
            self.api.create(rt, meta["namespace"], gateway, "kubesim")
        elif existing.get("spec") != gateway["spec"]:
            self.api.write(rt, {**clone(existing), "spec": gateway["spec"]}, "kubesim")

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.bootstrap()
        self.traffic.sync(self.store.list(PODS))
        self.store.subscribe(self.traffic.on_change)
        for controller in self.controllers:
            self.store.subscribe(controller.on_change)
            controller.start()
        self._runner = web.AppRunner(self.server.app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        ssl_context = self.credentials.server_context() if self.credentials else None
        site = web.TCPSite(self._runner, host, port, reuse_address=True, ssl_context=ssl_context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        if self._gateway_port is not None:
            self._gateway_runner = web.AppRunner(self.gateway.app, access_log=None, shutdown_timeout=1.0)
            await self._gateway_runner.setup()
            await web.TCPSite(self._gateway_runner, host, self._gateway_port, reuse_address=True).start()
            self.gateway_port = int(self._gateway_runner.addresses[0][1])
            self._describe_gateway(self.gateway_port)
        if self.state_file:
            self._autosave = asyncio.create_task(self._autosave_loop())
        return self.port

    async def stop(self) -> None:
        if self._autosave:
            self._autosave.cancel()
            await asyncio.wait({self._autosave})
        await self.server.close_watches()
        for controller in self.controllers:
            await controller.stop()
        if self._gateway_runner:
            await self._gateway_runner.cleanup()
        if self._runner:
            await self._runner.cleanup()
        self.save()

    def save(self) -> None:
        if self.state_file and self.store.rv != self._saved_rv:
            rv = self.store.rv
            self._write(rv, persist.encode(self.store))
            self._saved_rv = max(self._saved_rv, rv)

    def _write(self, rv: int, document: bytes) -> None:
        """Write `document`, the store at `rv`, unless a newer one is on disk already: an
        autosave's thread and a save on the loop never leave the older document there."""
        assert self.state_file is not None
        with self._write_lock:
            if rv <= self._written_rv:
                return
            persist.write(document, self.state_file)
            self._written_rv = rv

    async def _autosave_loop(self) -> None:
        """Every few seconds while anything changed: encoded on the loop, written in a thread,
        so requests are not held while the file is written."""
        while True:
            await asyncio.sleep(AUTOSAVE_SECONDS)
            if not self.state_file or self.store.rv == self._saved_rv:
                continue
            try:
                rv, document = self.store.rv, persist.encode(self.store)
                writing = asyncio.ensure_future(asyncio.to_thread(self._write, rv, document))
                try:
                    await asyncio.shield(writing)
                except asyncio.CancelledError:
                    # Stopping: the write in flight lands before the final save.
                    await asyncio.wait({writing})
                    if not writing.cancelled() and writing.exception() is not None:
                        log.error("saving state to %s failed", self.state_file, exc_info=writing.exception())
                    raise
            except Exception:  # the next round tries again; the final save is the stop's
                log.exception("saving state to %s failed", self.state_file)
                continue
            self._saved_rv = max(self._saved_rv, rv)

    # ---- control operations ----------------------------------------------------------------

    def _node(self, name: str) -> Object:
        return self.api.get(self.api.type_of("", "nodes"), "", name)

    def fail_node(self, name: str) -> Object:
        node = self._node(name)
        status = {**(node.get("status") or {}), "conditions": unknown_conditions(node)}
        return self.api.write_status(self.api.type_of("", "nodes"), node, status, "node-controller")

    def restore_node(self, name: str) -> Object:
        node = self._node(name)
        status = {**(node.get("status") or {}), "conditions": healthy_conditions()}
        return self.api.write_status(self.api.type_of("", "nodes"), node, status, "kubelet")

    def stall_node(self, name: str, stalled: bool = True) -> Object:
        """Wedge (or unwedge) the node's container runtime: it stays Ready and takes pods,
        whose containers then wait in ContainerCreating (`kubesim.controllers.kubelet`)."""
        node = self._node(name)
        if stalled:
            self.kubelet.stalled.add(name)
        else:
            self.kubelet.stalled.discard(name)
        self.kubelet.poke()
        return node

    def cordon_node(self, name: str, unschedulable: bool = True) -> Object:
        node = clone(self._node(name))
        if unschedulable:
            node["spec"]["unschedulable"] = True
        else:
            node["spec"].pop("unschedulable", None)
        return self.api.write(self.api.type_of("", "nodes"), node, "kubectl-cordon")

    def drain_node(self, name: str) -> dict[str, list[str]]:
        """Cordon, then evict every pod on the node, as `kubectl drain` does. Pods a disruption
        budget protects are reported blocked and retried (like kubectl's retry loop) whenever
        pods change, until they go or the node is uncordoned."""
        self.cordon_node(name)
        evicted, blocked = drain_pass(self.api, name)
        if blocked:
            self.node_lifecycle.draining.add(name)
        return {"evicted": evicted, "blocked": blocked}

    def kill_pod(self, namespace: str, name: str) -> bool:
        pod = self.api.get(self.api.type_of("", "pods"), namespace, name)
        if not self.kubelet.kill(pod["metadata"]["uid"]):
            raise ApiError(409, f"pod {namespace}/{name} has no running containers to kill (it is not on a "
                           "Ready node yet)")
        return True

    def set_image_behavior(self, image: str, **settings: Any) -> None:
        self.timing.images[image] = ImageBehavior(**settings)
        self.kubelet.poke()

    def set_default_timing(self, **settings: float | None) -> None:
        for key, value in settings.items():
            if value is not None:
                if not hasattr(self.timing, key) or key == "images":
                    raise ApiError(400, f"unknown timing setting {key!r}: use pull_seconds, start_seconds, "
                                   "ready_seconds, factor or stop_seconds")
                setattr(self.timing, key, float(value))
        self.kubelet.poke()

    def set_gateway_fault(self, namespace: str, name: str, target: str, **settings: Any) -> GatewayFault:
        """Bend the inference gateway's `target` ("probe" or "capacity") answers for one
        InferenceService: status, body, delaySeconds, close, servable, observedAt
        (`kubesim.gateway.GatewayFault`); replaces an earlier fault of the same target."""
        return self.gateway.set_fault(namespace, name, target, **settings)

    def clear_gateway_fault(self, namespace: str, name: str, target: str) -> bool:
        """Answer `target` as usual again; whether there was a fault to clear."""
        return self.gateway.clear_fault(namespace, name, target)
