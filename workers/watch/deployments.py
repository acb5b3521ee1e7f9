"""The Deployment watcher: turns changes of Deployment-mode components' Deployments into
`deployment_changed` signals to their InferenceService workflow.

A RawDeployment component runs as a plain Deployment; its `<Component>Ready` condition on
the InferenceService comes from the Deployment's status (`planning.service.deployment`).
The Deployment controller writes that status, so this watcher lists, then watches, the
product's Deployments (label `ome.io/inferenceservice`) and signals
`isvc/{ns}/{isvc}` with the Deployment's `DeploymentObserved` whenever it differs from the
last one sent (`isvc/{ns}/{isvc}@{cluster}` for a workload cluster's watcher). It runs next to
the pod watcher in `python -m workers.watcher`.

Level-triggered like the pod watcher: each signal carries the whole current state, so a
lost signal is repaired by the next one (and by the workflow's own back-off re-reads), a
restarted watcher brings every InferenceService up to date with its first pass, and the
workflow drops a signal older (by resourceVersion) than what it read itself. Bursts of
status writes within `coalesce_seconds` become one signal; a signal to an InferenceService
that does not exist is dropped; a failed one is retried with back-off.

The kind is optional: where RBAC does not allow listing Deployments the watch disables
itself and the workflows fall back on their re-reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes.client import ApiClient
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from models.pods import LABEL_ISVC
from planning.service.deployment import DeploymentObserved, observe_deployment
from workers.watch.loop import WatchLoop
from workers.watch.stream import KindWatch, WatchItem
from workflows.names import isvc_workflow_id
from workflows.service.messages import SIGNAL_DEPLOYMENT_CHANGED

logger = logging.getLogger("workers.watch.deployments")

DEPLOYMENTS = "deployments"

DeploymentSink = Callable[[str, DeploymentObserved], Awaitable[bool]]
"""Delivers one observation to one workflow id; False when the workflow does not exist."""

Key = tuple[str, str]
"""(namespace, Deployment name)."""


class TemporalDeploymentSink:
    """Signals `deployment_changed` through a Temporal client; NotFound means 'no such service'."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def __call__(self, workflow_id: str, observed: DeploymentObserved) -> bool:
        try:
            await self.client.get_workflow_handle(workflow_id).signal(SIGNAL_DEPLOYMENT_CHANGED, observed)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True


def _key(obj: dict[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


class DeploymentWatcher(WatchLoop):
    """Watches one cluster's product Deployments; `start()`/`stop()` or `run()`."""

    name = "deployment-watcher"

    def __init__(
        self,
        api_client: ApiClient,
        sink: DeploymentSink,
        *,
        cluster: str = "",
        coalesce_seconds: float = 0.05,
        read_timeout_seconds: float = 90.0,
    ) -> None:
        self.sink = sink
        self.cluster = cluster
        """The workload cluster watched ("" for the control plane): its signals go to
        `isvc/{ns}/{name}@{cluster}`, the home's member InferenceService workflow."""
        self.signals_sent = 0
        self.signal_failures = 0
        watch = KindWatch(
            api_client,
            DEPLOYMENTS,
            "/apis/apps/v1/deployments",
            LABEL_ISVC,
            read_timeout_seconds,
            optional=True,
        )
        super().__init__([watch], coalesce_seconds, logger)
        self._current: dict[Key, DeploymentObserved] = {}
        self._last_sent: dict[Key, DeploymentObserved] = {}
        self._dirty: set[Key] = set()

    def _has_dirty(self) -> bool:
        return bool(self._dirty)

    def lead(self) -> None:
        """Start sending: every current Deployment at the next pass. What this process sent while
        it led before says nothing of what another leader sent since."""
        self._last_sent.clear()
        self._dirty.update(self._current)
        super().lead()

    def _apply(self, item: WatchItem) -> None:
        if item.type == "BOOKMARK":
            return
        if item.type == "DISABLED":
            logger.info("deployment watch disabled reason=%s: workflows re-read Deployments", item.reason)
            self._synced_event.set()
            return
        if item.type == "RESYNC":
            seen: dict[Key, DeploymentObserved] = {}
            for obj in item.objects:
                observed = observe_deployment(obj)
                if observed is not None:
                    seen[_key(obj)] = observed
            # Deployments that vanished while we were not watching are reported gone.
            for key, last in self._current.items():
                if key not in seen:
                    seen[key] = last.model_copy(update={"exists": False})
            self._current = seen
            self._dirty.update(seen)
            return
        obj = item.objects[0]
        observed = observe_deployment(obj, exists=item.type != "DELETED")
        if observed is None:
            return
        self._current[_key(obj)] = observed
        self._dirty.add(_key(obj))

    async def _flush(self) -> None:
        dirty, self._dirty = self._dirty, set()
        pending = [
            (key, self._current[key])
            for key in sorted(dirty)
            if key in self._current and not self._current[key].same_state(self._last_sent.get(key))
        ]
        try:
            results = await asyncio.gather(*(self._send(key, observed) for key, observed in pending))
        except asyncio.CancelledError:
            self._dirty.update(dirty)  # `follow()`: sent at the next `lead()`
            raise
        self._dirty.update(key for (key, _), ok in zip(pending, results, strict=True) if not ok)
        for key, observed in list(self._current.items()):
            if not observed.exists and key not in self._dirty:
                del self._current[key]
        self._after_flush(bool(self._dirty))

    async def _send(self, key: Key, observed: DeploymentObserved) -> bool:
        """Signal one InferenceService; True when handled (delivered or no such workflow)."""
        workflow_id = isvc_workflow_id(observed.namespace, observed.isvc, self.cluster or None)
        try:
            delivered = await self.sink(workflow_id, observed)
        except Exception as error:  # a Temporal outage must not end the watcher
            self.signal_failures += 1
            logger.warning("signal failed workflow_id=%s error=%s", workflow_id, str(error)[:300])
            return False
        if delivered:
            self.signals_sent += 1
        if observed.exists:
            self._last_sent[key] = observed
        else:
            self._last_sent.pop(key, None)
        return True
