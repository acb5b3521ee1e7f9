"""List-then-watch of one resource kind on a thread, the way client-go's reflector does it.

A `KindWatch` lists the collection, hands the whole list to the watcher as one `RESYNC`,
then watches from the list's resourceVersion and hands over each ADDED/MODIFIED/DELETED
event. When the stream ends (server timeout, a cut connection, kubesim's injected cuts) it
resumes from the last resourceVersion it saw, bookmarks included; when the server answers
410 Gone or an ERROR event, the version is too old and it lists again. API and connection
errors back off (0.2 s doubling to 5 s) so a failing API server is not hammered.

The thread blocks in the official client's socket reads; `stop()` shuts the socket down to
wake it, as `kubernetes.watch.Watch.stop` does.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import urllib3.exceptions
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from activities.kube_errors import retry_after
from activities.kube_rest import KubeRest

logger = logging.getLogger("workers.watcher")

# Server-side end of each watch request; the stream is then resumed from its last version.
WATCH_TIMEOUT_SECONDS = 300
INITIAL_BACKOFF = 0.2
MAX_BACKOFF = 5.0


@dataclass(frozen=True)
class WatchItem:
    """What a watch thread hands to the watcher: a full RESYNC, one event, a BOOKMARK (only
    the resourceVersion moved), or DISABLED (an optional kind the server does not serve)."""

    kind: str
    type: str  # RESYNC | ADDED | MODIFIED | DELETED | BOOKMARK | DISABLED
    objects: list[dict[str, Any]] = field(default_factory=list)
    resource_version: str = ""
    reason: str = ""


class KindWatch:
    """One kind's list+watch loop on a daemon thread."""

    def __init__(
        self,
        api_client: ApiClient,
        name: str,
        path: str,
        label_selector: str,
        read_timeout: float,
        *,
        optional: bool = False,
    ) -> None:
        self.rest = KubeRest(api_client)
        self.name = name
        self.path = path
        self.label_selector = label_selector
        self.read_timeout = read_timeout
        # Optional kinds (EndpointSlices) may be absent or forbidden: the watcher does without.
        self.optional = optional
        self._stop = threading.Event()
        self._response: Any = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, post: Callable[[WatchItem], None]) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(post,), name=f"watch-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            sock = getattr(getattr(response, "connection", None), "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _opened(self, response: Any) -> None:
        with self._lock:
            self._response = response
        if self._stop.is_set():
            self.stop()

    def _query(self) -> list[tuple[str, Any]]:
        return [("labelSelector", self.label_selector)] if self.label_selector else []

    def _run(self, post: Callable[[WatchItem], None]) -> None:
        version: str | None = None
        backoff = INITIAL_BACKOFF
        while not self._stop.is_set():
            try:
                if version is None:
                    listed = self.rest.get(self.path, self._query())
                    version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                    post(WatchItem(self.name, "RESYNC", list(listed.get("items") or []), version))
                version = self._watch(post, version)
                backoff = INITIAL_BACKOFF
                continue
            except ApiException as error:
                if error.status == 410:
                    version = None
                    continue
                if self.optional and error.status in (403, 404) and version is None:
                    post(WatchItem(self.name, "DISABLED", reason=f"HTTP {error.status}"))
                    return
                if not self._stop.is_set():
                    logger.warning(
                        "watch error kind=%s status=%s reason=%s", self.name, error.status, error.reason
                    )
                # A throttling server says when to come back: wait at least that long (capped).
                delay = retry_after(error)
                if delay is not None:
                    backoff = max(backoff, min(delay.total_seconds(), 30.0))
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
                # A cut or silent stream, or a half-written line: resume from the last version.
                if not self._stop.is_set():
                    logger.info("watch stream ended kind=%s error=%s", self.name, type(error).__name__)
            finally:
                with self._lock:
                    self._response = None
            self._stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _watch(self, post: Callable[[WatchItem], None], version: str) -> str | None:
        """Stream events from `version`; the version to resume from, or None to relist."""
        query = [
            *self._query(),
            ("watch", "true"),
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", WATCH_TIMEOUT_SECONDS),
        ]
        for event in self.rest.watch_lines(self.path, query, self.read_timeout, on_open=self._opened):
            event_type = event.get("type")
            obj = event.get("object") or {}
            if event_type == "ERROR":
                # 410 Expired (or any error) mid-stream: our version is unusable, list again.
                logger.info(
                    "watch expired kind=%s code=%s message=%s", self.name, obj.get("code"), obj.get("message")
                )
                return None
            new_version = (obj.get("metadata") or {}).get("resourceVersion")
            if new_version:
                version = str(new_version)
            if event_type in ("ADDED", "MODIFIED", "DELETED"):
                post(WatchItem(self.name, str(event_type), [obj], version))
            elif event_type == "BOOKMARK":
                post(WatchItem(self.name, "BOOKMARK", [], version))
            if self._stop.is_set():
                break
        return version
