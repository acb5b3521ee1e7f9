"""The directory of workload clusters: a client for each reachable WorkloadCluster.

`ClusterDirectory` lists the WorkloadClusters on the control plane (`ome.io/v1beta1`,
cluster-scoped), reads each one's kubeconfig Secret, checks it (`models.kubeconfig`), builds a
`kubernetes.client.ApiClient` for each valid one and probes GET /version; from what it saw,
`planning.clusters.reachability` gives each cluster's `Ready` condition. `refresh()` does one
pass (blocking I/O; run it on a thread); `run()` repeats it every refresh interval and calls
back after each pass, which is how the worker starts and stops its per-cluster workers and the
watcher its per-cluster watchers. `write_status()` (the watcher only) writes each changed
`Ready` condition with a merge patch on the status subresource.

The official client reads CA and client certificates from files: the inline PEMs are written
under a private temporary directory (mode 0700), one set per client. A client replaced (a
changed kubeconfig) or dropped (the cluster goes) is closed, and its files removed, only after
the pass's callback has stopped what ran on it (`release_retired`); the directory goes with
`close()`.

Without the WorkloadCluster CRD (404 from the list) there are no clusters: it is logged once.

`PerCluster` keeps one thing per reachable cluster (the worker's Temporal workers, the
watcher's watchers) in step with `clients()`: started for a new cluster, restarted when its
client changes (a new kubeconfig), stopped when the cluster goes or becomes unreachable.

Public API: `ClusterDirectory`, `ClusterState`, `PerCluster`, `WLC_GROUP`, `WLC_VERSION`, `WLC_PLURAL`,
`PROBE_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

import kubernetes.client
import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from activities.kube_rest import KubeRest
from models.inferencereplica import Condition
from models.kubeconfig import ClusterAccess, KubeConfigError, parse_workload_kubeconfig
from models.workloadcluster import ClusterSource
from planning.clusters.reachability import (
    DEFAULT_CONNECTION_GRACE_SECONDS,
    READY,
    SOURCE_CLUSTER_PROFILE,
    SOURCE_KUBECONFIG,
    ClusterObservation,
    ProbeFailure,
    ready_condition,
)
from workers.config import KUBE_CONNECTIONS

logger = logging.getLogger("workers.clusters")

WLC_GROUP, WLC_VERSION, WLC_PLURAL = "ome.io", "v1beta1", "workloadclusters"
PROBE_TIMEOUT_SECONDS = 5.0
"""Connect and read timeout of one GET /version."""
DEFAULT_SECRET_NAMESPACE = "default"
"""Namespace of a `secretRef` that names none (a WorkloadCluster is cluster-scoped)."""
_ERROR_CAP = 300

Clock = Callable[[], datetime]
T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class ClusterState:
    """What the directory keeps of one WorkloadCluster between passes."""

    name: str
    generation: int | None = None
    fingerprint: str | None = None
    """sha256 of the kubeconfig the client was built from."""
    api_client: ApiClient | None = None
    files: Path | None = None
    last_success: datetime | None = None
    first_failure: datetime | None = None
    condition: Condition | None = None
    """The Ready condition computed in the last pass."""
    on_object: Condition | None = None
    """The Ready condition the object carried when last listed (or as last written)."""
    extra_conditions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.condition is not None and self.condition.status == "True"


class ClusterDirectory:
    """WorkloadClusters on the control plane, their clients and their `Ready` conditions."""

    def __init__(
        self,
        control_plane: ApiClient,
        *,
        connection_grace_seconds: float = DEFAULT_CONNECTION_GRACE_SECONDS,
        refresh_interval_seconds: float = 15.0,
        probe_timeout_seconds: float = PROBE_TIMEOUT_SECONDS,
        clock: Clock = _now,
    ) -> None:
        self.control_plane = control_plane
        self.connection_grace_seconds = connection_grace_seconds
        self.refresh_interval_seconds = refresh_interval_seconds
        self.probe_timeout_seconds = probe_timeout_seconds
        self._clock = clock
        self._custom = kubernetes.client.CustomObjectsApi(control_plane)
        self._core = kubernetes.client.CoreV1Api(control_plane)
        self._rest = KubeRest(control_plane)
        self._states: dict[str, ClusterState] = {}
        self._files_root = Path(tempfile.mkdtemp(prefix="ome-clusters-"))
        self._crd_missing_logged = False
        self._retired: list[tuple[str, ApiClient, Path | None]] = []
        """Clients replaced or dropped in a pass: what runs on them (a cluster's worker, its
        watchers) is stopped after the pass, so they are closed only then (`release_retired`)."""

    # --- what consumers read -------------------------------------------------------------------

    def clients(self) -> dict[str, ApiClient]:
        """A client per reachable cluster (`Ready` True), by WorkloadCluster name."""
        return {
            name: state.api_client
            for name, state in sorted(self._states.items())
            if state.ready and state.api_client is not None
        }

    def conditions(self) -> dict[str, Condition]:
        """Each WorkloadCluster's `Ready` condition from the last pass."""
        return {name: state.condition for name, state in sorted(self._states.items()) if state.condition}

    # --- one pass --------------------------------------------------------------------------------

    def refresh(self) -> None:
        """List, read Secrets, (re)build clients, probe; blocking, so run it on a thread."""
        objects = self._list()
        if objects is None:
            return  # the list failed: keep what we have, try again next pass
        seen: set[str] = set()
        pending: list[tuple[ClusterState, dict[str, Any], ClusterObservation]] = []
        for obj in objects:
            name = str((obj.get("metadata") or {}).get("name") or "")
            if not name:
                continue
            seen.add(name)
            state = self._states.get(name)
            if state is None:
                state = self._states[name] = ClusterState(name)
            self._read_object(state, obj)
            pending.append((state, obj, self._observe(state, obj)))
        for name in sorted(set(self._states) - seen):
            logger.info("workload cluster removed name=%s", name)
            self._drop_client(self._states.pop(name))
        # Probes may wait for their timeout: run them side by side.
        to_probe = [(state, seen_) for state, _, seen_ in pending if seen_.probe is None and state.api_client]
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(to_probe))), thread_name_prefix="probe") as pool:
            outcomes = list(pool.map(lambda item: self._probe(item[0]), to_probe))
        probed = {id(state): outcome for (state, _), outcome in zip(to_probe, outcomes, strict=True)}
        now = self._clock()
        for state, _, observation in pending:
            if id(state) in probed:
                failure = probed[id(state)]
                if failure is None:
                    state.last_success, state.first_failure = now, None
                else:
                    state.first_failure = state.first_failure or now
                observation = ClusterObservation(
                    secret_ref=observation.secret_ref,
                    probe=failure,
                    last_success=state.last_success,
                    first_failure=state.first_failure,
                    generation=state.generation,
                )
            before = state.condition
            state.condition = ready_condition(
                observation, now, state.on_object or state.condition, self.connection_grace_seconds
            )
            if before is None or (before.status, before.reason) != (state.condition.status, state.condition.reason):
                logger.info(
                    "workload cluster name=%s ready=%s reason=%s message=%s",
                    state.name,
                    state.condition.status,
                    state.condition.reason,
                    state.condition.message,
                )

    def _list(self) -> list[dict[str, Any]] | None:
        try:
            answer = self._custom.list_cluster_custom_object(
                WLC_GROUP, WLC_VERSION, WLC_PLURAL, _request_timeout=(5.0, 15.0)
            )
        except ApiException as error:
            if error.status == 404:
                if not self._crd_missing_logged:
                    logger.info("no WorkloadCluster CRD on the control plane (404): no workload clusters")
                    self._crd_missing_logged = True
                return []
            logger.warning("listing WorkloadClusters failed: %s %s", error.status, error.reason)
            return None
        except Exception as error:  # the control plane is down: keep the last view
            logger.warning("listing WorkloadClusters failed: %s", _short(error))
            return None
        self._crd_missing_logged = False
        items = answer.get("items") if isinstance(answer, dict) else None
        return [item for item in items or [] if isinstance(item, dict)]

    def _read_object(self, state: ClusterState, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        state.generation = metadata.get("generation")
        conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        state.extra_conditions = [c for c in conditions if c.get("type") != READY]
        ready = next((c for c in conditions if c.get("type") == READY), None)
        try:
            state.on_object = Condition.model_validate(ready) if ready else None
        except ValidationError:
            state.on_object = None
        if state.last_success is None and state.on_object is not None and state.on_object.status == "True":
            # Reachable when this process started: a failing probe now gets the grace.
            state.last_success = self._clock()

    def _observe(self, state: ClusterState, obj: dict[str, Any]) -> ClusterObservation:
        """Secret and kubeconfig checks; a `probe` of None here means 'probe it'."""
        generation = state.generation
        try:
            source = ClusterSource.model_validate((obj.get("spec") or {}).get("clusterSource") or {})
        except ValidationError as error:
            self._drop_client(state)
            problem = "; ".join(e["msg"] for e in error.errors())
            return ClusterObservation(kubeconfig_problem=f"spec.clusterSource: {problem}", generation=generation)
        if source.cluster_profile_ref is not None or source.kube_config is None:
            self._drop_client(state)
            return ClusterObservation(source=SOURCE_CLUSTER_PROFILE, generation=generation)
        ref = source.kube_config.secret_ref
        namespace = ref.namespace or DEFAULT_SECRET_NAMESPACE
        key = source.kube_config.effective_key
        secret_ref = f"{namespace}/{ref.name}"
        text, missing = self._read_secret(namespace, ref.name, key)
        if missing is not None:
            self._drop_client(state)
            return ClusterObservation(secret_ref=secret_ref, secret_missing=missing, generation=generation)
        assert text is not None
        fingerprint = hashlib.sha256(text.encode()).hexdigest()
        if fingerprint != state.fingerprint or state.api_client is None:
            try:
                access = parse_workload_kubeconfig(text)
            except KubeConfigError as error:
                self._drop_client(state)
                return ClusterObservation(
                    secret_ref=secret_ref, kubeconfig_problem=str(error), generation=generation
                )
            if state.api_client is not None:
                logger.info("workload cluster kubeconfig changed name=%s: new client", state.name)
            self._drop_client(state)
            state.api_client, state.files = self._build_client(state.name, fingerprint, access)
            state.fingerprint = fingerprint
        return ClusterObservation(source=SOURCE_KUBECONFIG, secret_ref=secret_ref, generation=generation)

    def _read_secret(self, namespace: str, name: str, key: str) -> tuple[str | None, str | None]:
        """The kubeconfig text, or what is missing (`Secret ns/name`, `key "k" of Secret ns/name`)."""
        try:
            secret = self._rest.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        except ApiException as error:
            if error.status == 404:
                return None, f"Secret {namespace}/{name}"
            return None, f"Secret {namespace}/{name} (reading it failed: {error.status} {error.reason})"
        value = (secret.get("data") or {}).get(key)
        if value is None and key in (secret.get("stringData") or {}):
            return str(secret["stringData"][key]), None
        if not value:
            return None, f"key {key!r} of Secret {namespace}/{name}"
        try:
            return base64.b64decode(value).decode("utf-8"), None
        except (ValueError, UnicodeDecodeError):
            return None, f"key {key!r} of Secret {namespace}/{name} (not base64 UTF-8 text)"

    def _build_client(self, name: str, fingerprint: str, access: ClusterAccess) -> tuple[ApiClient, Path]:
        files = Path(tempfile.mkdtemp(prefix=f"{name}-{fingerprint[:12]}-", dir=self._files_root))
        configuration = kubernetes.client.Configuration()
        configuration.host = access.server
        configuration.verify_ssl = True
        ca = files / "ca.crt"
        ca.write_bytes(access.ca_pem)
        configuration.ssl_ca_cert = str(ca)
        if access.client_cert_pem is not None and access.client_key_pem is not None:
            cert, key = files / "client.crt", files / "client.key"
            cert.write_bytes(access.client_cert_pem)
            key.touch(mode=0o600)
            key.write_bytes(access.client_key_pem)
            configuration.cert_file, configuration.key_file = str(cert), str(key)
        if access.token:
            configuration.api_key = {"BearerToken": access.token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        if access.tls_server_name:
            configuration.tls_server_name = access.tls_server_name
        configuration.connection_pool_maxsize = KUBE_CONNECTIONS
        return ApiClient(configuration), files

    def _probe(self, state: ClusterState) -> ProbeFailure | None:
        """GET /version once, without urllib3's retries: the next pass is the retry."""
        api_client = state.api_client
        assert api_client is not None
        timeout = urllib3.Timeout(connect=self.probe_timeout_seconds, read=self.probe_timeout_seconds)
        try:
            method, url, headers, _, _ = api_client.param_serialize(
                method="GET",
                resource_path="/version",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            response = api_client.rest_client.pool_manager.request(
                method, url, headers=headers, timeout=timeout, retries=False, preload_content=True
            )
        except Exception as error:
            return ProbeFailure(_short(error))
        if not 200 <= response.status <= 299:
            body = response.data.decode("utf-8", errors="replace")[:_ERROR_CAP] if response.data else ""
            return ProbeFailure(f"{response.status} {response.reason}{': ' + body if body else ''}")
        return None

    def _drop_client(self, state: ClusterState) -> None:
        """Retire the cluster's client: it is closed, and its certificate files removed, by
        `release_retired` once its consumers stopped using it."""
        if state.api_client is not None:
            self._retired.append((state.name, state.api_client, state.files))
        elif state.files is not None:
            shutil.rmtree(state.files, ignore_errors=True)
        state.api_client, state.files, state.fingerprint = None, None, None

    def release_retired(self) -> None:
        """Close the clients retired since the last call and remove their certificate files.
        `run` calls it after `after_pass` has stopped what ran on them."""
        retired, self._retired = self._retired, []
        for name, api_client, files in retired:
            try:
                api_client.close()  # type: ignore[no-untyped-call]
            except Exception:  # closing a pool must not end a pass
                logger.debug("closing the client of %s failed", name, exc_info=True)
            if files is not None:
                shutil.rmtree(files, ignore_errors=True)

    # --- status writer (the watcher) --------------------------------------------------------------

    def write_status(self) -> int:
        """Write each `Ready` condition that differs from the object's; returns how many."""
        written = 0
        for name, state in sorted(self._states.items()):
            condition = state.condition
            if condition is None or _same(condition, state.on_object):
                continue
            body = {"status": {"conditions": [*state.extra_conditions, condition.to_manifest()]}}
            try:
                self._rest.request(
                    "PATCH",
                    f"/apis/{WLC_GROUP}/{WLC_VERSION}/{WLC_PLURAL}/{name}/status",
                    body=body,
                    content_type="application/merge-patch+json",
                )
            except Exception as error:  # retried next pass
                logger.warning("writing WorkloadCluster %s status failed: %s", name, _short(error))
                continue
            state.on_object = condition
            written += 1
        return written

    # --- the loop ----------------------------------------------------------------------------------

    async def run(
        self,
        stop: asyncio.Event,
        after_pass: Callable[[ClusterDirectory], Awaitable[None]] | None = None,
        *,
        write_status: bool = False,
    ) -> None:
        """Refresh every interval until `stop`, writing status (watcher) and calling `after_pass`."""
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.refresh)
                # `stop` may come mid-pass (the watcher lost its Lease): no further step starts.
                if write_status and not stop.is_set():
                    await asyncio.to_thread(self.write_status)
                if after_pass is not None and not stop.is_set():
                    await after_pass(self)
                # Only now that what ran on a replaced or dropped client has stopped.
                self.release_retired()
            except Exception:  # one failed pass must not end the loop
                logger.exception("workload cluster pass failed")
            try:
                await asyncio.wait_for(stop.wait(), self.refresh_interval_seconds)
            except TimeoutError:
                pass

    def close(self) -> None:
        """Close every client and remove the certificate files."""
        for state in self._states.values():
            self._drop_client(state)
        self._states.clear()
        self.release_retired()
        shutil.rmtree(self._files_root, ignore_errors=True)


class PerCluster(Generic[T]):
    """One `T` per reachable cluster: `start(name, client)` makes it, `stop(name, it)` ends it."""

    def __init__(
        self,
        start: Callable[[str, ApiClient], Awaitable[T]],
        stop: Callable[[str, T], Awaitable[None]],
    ) -> None:
        self._start = start
        self._stop = stop
        self._running: dict[str, tuple[ApiClient, T]] = {}

    @property
    def running(self) -> dict[str, T]:
        return {name: item for name, (_, item) in sorted(self._running.items())}

    async def reconcile(self, clients: dict[str, ApiClient]) -> None:
        """Stop what belongs to gone or changed clients, then start what is missing."""
        for name in sorted(self._running):
            if clients.get(name) is not self._running[name][0]:
                await self._end(name)
        for name, api_client in sorted(clients.items()):
            if name not in self._running:
                self._running[name] = (api_client, await self._start(name, api_client))

    async def _end(self, name: str) -> None:
        _, item = self._running.pop(name)
        try:
            await self._stop(name, item)
        except Exception:  # one cluster's failed stop must not keep the others running
            logger.warning("stopping what runs for workload cluster %s failed", name, exc_info=True)

    async def stop_all(self) -> None:
        await asyncio.gather(*(self._end(name) for name in sorted(self._running)))


def _same(a: Condition, b: Condition | None) -> bool:
    if b is None:
        return False
    fields = ("status", "reason", "message", "observed_generation")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _short(error: BaseException) -> str:
    """An error's text, the innermost reason for urllib3's retries, capped."""
    reason = getattr(error, "reason", None)
    text = f"{type(error).__name__}: {reason or error}"
    return text[:_ERROR_CAP]
