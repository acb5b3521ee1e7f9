"""Leader election for the watcher and the controller, on a `coordination.k8s.io/v1` Lease.

Two of each run (deploy/*.yaml `replicas: 2`, `make up`); `LeaderElector.run` campaigns for the
Lease `ome-watcher` or `ome-controller` and runs the process's `lead` coroutine only while it
holds it, like client-go's `leaderelection`:

- a standby reads the Lease every retry period and writes itself in (acquire) once the holder
  has not renewed for the lease duration, counted on the standby's own clock from when it saw
  the record change (`planning.leadership.may_take`); a conflicting write (409) means another
  process won, and that is the end of this try;
- the leader renews every retry period with one PUT carrying the resourceVersion it last wrote
  (no read first); a timer cancels `lead` at the renew deadline (last renewal + deadline)
  whatever the renewal in flight is doing, and a renewal that finds another holder cancels it
  at once; either way it goes back to campaigning. Lease requests run on the elector's own
  thread, are not retried by urllib3, and time out by the deadline, so a hanging API server
  cannot keep a leader acting past its Lease;
- on a graceful stop the leader releases the Lease (no holder), so the standby takes over at
  its next read instead of after the lease duration.

The leader's Lease carries annotations its `lead` side supplies (`annotations()`), written with
each renewal at no extra request; the next leader's `lead` receives the annotations of the record
it took over (the watcher's hand-over mark, `workers.watch.pods.PodWatcher.delivered`).

Requests: the leader one PUT per retry period, a standby one GET per retry period.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import kubernetes.client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTClientObject

from planning.leadership import LeaseRecord, claimed, expires_at, may_take, released, still_leading
from workers.config import LeaderSettings

logger = logging.getLogger("workers.leader")

WATCHER_LEASE = "ome-watcher"
CONTROLLER_LEASE = "ome-controller"

Lead = Callable[[Mapping[str, str]], Coroutine[Any, Any, None]]
"""What the leader runs, given the annotations of the Lease it took over; cancelled on loss."""


def default_identity() -> str:
    """`<hostname>_<pid>`: the pod name in Kubernetes, unique per process on one machine."""
    return f"{socket.gethostname()}_{os.getpid()}"


def _record(lease: kubernetes.client.V1Lease | None) -> LeaseRecord | None:
    if lease is None or lease.spec is None:
        return None
    spec = lease.spec
    return LeaseRecord(
        holder=spec.holder_identity or "",
        lease_seconds=float(spec.lease_duration_seconds or 0),
        acquire_time=spec.acquire_time,
        renew_time=spec.renew_time,
        transitions=int(spec.lease_transitions or 0),
    )


def _spec(record: LeaseRecord) -> kubernetes.client.V1LeaseSpec:
    return kubernetes.client.V1LeaseSpec(
        holder_identity=record.holder or None,
        lease_duration_seconds=max(1, round(record.lease_seconds)),
        acquire_time=record.acquire_time,
        renew_time=record.renew_time,
        lease_transitions=record.transitions,
    )


def _without_retries(api_client: ApiClient) -> ApiClient:
    """`api_client`, its requests no longer retried by urllib3 (3 tries by default would stretch
    one Lease request well past the renew deadline)."""
    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = False
    api_client.rest_client = RESTClientObject(configuration)
    return api_client


def _micro_time(value: datetime) -> str:
    """A `MicroTime` as the API server parses it: always a 6-digit fraction and `Z`."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(api_client: ApiClient, lease: kubernetes.client.V1Lease) -> Any:
    """`lease` as the JSON to send. The client would write its times with `isoformat()`, which
    drops the fraction when the microseconds are 0: a real API server refuses that (400). A dict,
    typed `Any` for the client's signatures, which name the model class."""
    body: dict[str, Any] = api_client.sanitize_for_serialization(lease)  # type: ignore[no-untyped-call]
    spec = lease.spec
    if spec is not None:
        for name, value in (("acquireTime", spec.acquire_time), ("renewTime", spec.renew_time)):
            if value is not None:
                body["spec"][name] = _micro_time(value)
    return body


class LeaderElector:
    """Campaign for one Lease; `run(stop, lead)` until `stop`. `leading` says whether it holds it.
    `api_client` is the elector's own: its requests stop being retried."""

    def __init__(
        self,
        api_client: ApiClient,
        name: str,
        settings: LeaderSettings,
        *,
        annotations: Callable[[], Mapping[str, str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = kubernetes.client.CoordinationV1Api(_without_retries(api_client))
        self.name = name
        self.namespace = settings.namespace
        self.identity = settings.identity or default_identity()
        self.settings = settings
        self.annotations = annotations
        self.clock = clock
        self.leading = False
        self._lease: kubernetes.client.V1Lease | None = None
        self._observed_version = ""
        self._observed_at = 0.0
        self._renewed_at = 0.0
        self._taken_over: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        """`lead`, while leading."""
        self._expiry: asyncio.Task[None] | None = None
        """The renew-deadline timer, while leading."""
        self._lead_ended = asyncio.Event()
        """Set while no `lead` runs or winds down: the next one starts only then."""
        self._lead_ended.set()

    # --- one try, on a thread (the kubernetes client blocks) ----------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One attempt to write ourselves into the Lease; True when we hold it afterwards."""
        now, wall_now = self.clock(), datetime.now(UTC)
        # Long enough for a slow answer, short enough for two tries within the renew deadline;
        # a leader's never past its deadline (the timer stops it there anyway).
        timeout = self.settings.renew_deadline_seconds / 2
        if self.leading:
            left = self._renewed_at + self.settings.renew_deadline_seconds - now
            timeout = max(0.05, min(timeout, left))
        lease = self._lease if self.leading else None
        if lease is None:
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=timeout)
            except ApiException as error:
                if error.status != 404:
                    raise
                return self._create(wall_now, timeout)
        metadata = lease.metadata or kubernetes.client.V1ObjectMeta()
        lease.metadata = metadata
        version = metadata.resource_version or ""
        if version != self._observed_version:
            self._observed_version, self._observed_at = version, now
        record = _record(lease)
        if not may_take(self.identity, record, self._observed_at, now):
            self._lease = lease
            return False
        # Starting to lead (a takeover, or our own Lease after a restart with the same identity):
        # the record's annotations are the previous leader's, for `lead`.
        taking_over = not self.leading
        previous_annotations = dict(metadata.annotations or {})
        lease.spec = _spec(claimed(self.identity, record, wall_now, self.settings.lease_duration_seconds))
        if self.annotations is not None and not taking_over:
            metadata.annotations = {**previous_annotations, **self.annotations()}
        try:
            written = self.api.replace_namespaced_lease(
                self.name, self.namespace, lease_body(self.api.api_client, lease), _request_timeout=timeout
            )
        except ApiException as error:
            self._lease = None  # read it again: someone else wrote since
            if error.status == 409:
                return False
            raise
        if taking_over:
            self._taken_over = previous_annotations
        self._remember(written, now)
        return True

    def _create(self, wall_now: datetime, timeout: float) -> bool:
        lease = kubernetes.client.V1Lease(
            metadata=kubernetes.client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=_spec(claimed(self.identity, None, wall_now, self.settings.lease_duration_seconds)),
        )
        try:
            written = self.api.create_namespaced_lease(
                self.namespace, lease_body(self.api.api_client, lease), _request_timeout=timeout
            )
        except ApiException as error:
            if error.status == 409:
                return False  # another process created it first
            raise
        self._taken_over = {}
        self._remember(written, self.clock())
        return True

    def _remember(self, written: kubernetes.client.V1Lease, now: float) -> None:
        self._lease = written
        self._observed_version = (written.metadata.resource_version or "") if written.metadata else ""
        self._observed_at = now
        self._renewed_at = now

    def release(self) -> None:
        """Give the Lease up (graceful stop), so the standby need not wait out the duration."""
        lease, record = self._lease, _record(self._lease)
        if lease is None or record is None or record.holder != self.identity:
            return
        lease.spec = _spec(released(record, datetime.now(UTC)))
        try:
            self.api.replace_namespaced_lease(
                self.name,
                self.namespace,
                lease_body(self.api.api_client, lease),
                _request_timeout=self.settings.renew_deadline_seconds / 2,
            )
            logger.info("released lease %s/%s identity=%s", self.namespace, self.name, self.identity)
        except Exception as error:  # the standby will wait out the lease instead
            logger.warning("could not release lease %s/%s: %s", self.namespace, self.name, str(error)[:300])

    # --- the campaign -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, lead: Lead) -> None:
        """Campaign until `stop`; run `lead` while holding the Lease, cancel it the moment we don't."""
        if not self.settings.elect:
            self.leading = True
            await _until_stopped(stop, lead({}))
            return
        logger.info(
            "campaigning for lease %s/%s identity=%s", self.namespace, self.name, self.identity
        )
        loop = asyncio.get_running_loop()
        # Its own thread: Lease requests never queue behind the process's other blocking calls.
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"lease-{self.name}")
        try:
            while not stop.is_set():
                was_leading = self.leading
                try:
                    held = await loop.run_in_executor(executor, self.try_acquire_or_renew)
                except Exception as error:
                    logger.warning("lease %s/%s: %s", self.namespace, self.name, str(error)[:300])
                    held = False
                if was_leading and not self.leading:
                    # The timer stopped us while this renewal was in flight: whatever it says,
                    # read the Lease afresh and take it over like any other candidate.
                    held, self._lease = False, None
                now = self.clock()
                if held and not self.leading and self._lead_ended.is_set():
                    self.leading = True
                    self._lead_ended.clear()
                    logger.info(
                        "became leader of lease %s/%s identity=%s", self.namespace, self.name, self.identity
                    )
                    self._task = asyncio.create_task(lead(dict(self._taken_over)), name=f"lead {self.name}")
                    self._expiry = asyncio.create_task(self._expire(), name=f"lease deadline {self.name}")
                elif self.leading and not held and (
                    not still_leading(self._renewed_at, now, self.settings.renew_deadline_seconds)
                    or self._lost_to_another()
                ):
                    await self._stop_leading("lost the lease")
                if self._task is not None and self._task.done():
                    # `lead` must run until cancelled: a return or an error ends the process
                    # (after the release below).
                    self._task.result()
                    raise RuntimeError(f"lead of lease {self.name} returned: it must run until cancelled")
                await _sleep(stop, self._pause(now))
        finally:
            was_leading = self.leading
            try:
                await self._stop_leading("the process stops")
            finally:
                if was_leading:
                    await loop.run_in_executor(executor, self.release)
                executor.shutdown(wait=False)

    async def _expire(self) -> None:
        """Stop leading at the renew deadline, whatever the renewal in flight is doing."""
        while self.leading:
            left = self._renewed_at + self.settings.renew_deadline_seconds - self.clock()
            if left <= 0:
                await self._stop_leading("not renewed within the renew deadline")
                return
            await asyncio.sleep(left)

    async def _stop_leading(self, why: str) -> None:
        """Cancel `lead` and the timer, and wait for `lead` to finish."""
        if self.leading:
            logger.warning(
                "lease %s/%s identity=%s: %s, stopping at once", self.namespace, self.name, self.identity, why
            )
        self.leading = False
        task, self._task = self._task, None
        expiry, self._expiry = self._expiry, None
        if expiry is not None and expiry is not asyncio.current_task():
            expiry.cancel()
        if task is None:
            return
        try:
            await _cancel(task)
        finally:
            self._lead_ended.set()

    def _lost_to_another(self) -> bool:
        record = _record(self._lease)
        return self._lease is not None and record is not None and record.holder not in ("", self.identity)

    def _pause(self, now: float) -> float:
        retry = self.settings.retry_period_seconds
        record = _record(self._lease)
        if self.leading or record is None or not record.holder:
            return retry
        # Try again the moment the holder's lease runs out, not up to a period later.
        return max(0.05, min(retry, expires_at(record, self._observed_at) - now))


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


async def _until_stopped(stop: asyncio.Event, work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.create_task(work)
    try:
        await stop.wait()
    finally:
        await _cancel(task)
