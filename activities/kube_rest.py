"""Plain-JSON requests to the Kubernetes API through the official client's `ApiClient`.

The activities handle Pods, Services, PDBs, PodGroups, Events and the product's custom
resources alike, as dicts. Going through `ApiClient.param_serialize`/`call_api` keeps the
official client's authentication, TLS, proxies and connection pool (a kubeconfig or the
in-cluster account work unchanged) while skipping its typed models, which would drop
fields they do not know and cannot carry custom resources.

Paths follow the API's layout: `/api/v1/...` for the core group, `/apis/{group}/{version}`
otherwise; `plural_for` derives the resource name of a kind the way kubectl's RESTMapper
guesses it, with a table for irregular plurals.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3.util
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from activities import keep_alive, kube_metrics
from models.kube_ops import ObjectRef

# A single request must not hang a worker thread: (connect, read) seconds.
REQUEST_TIMEOUT = (10.0, 30.0)

CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}

_IRREGULAR_PLURALS = {
    "Endpoints": "endpoints",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "Ingress": "ingresses",
    "NetworkPolicy": "networkpolicies",
    "PriorityClass": "priorityclasses",
    "StorageClass": "storageclasses",
    "IngressClass": "ingressclasses",
    "RuntimeClass": "runtimeclasses",
    "GatewayClass": "gatewayclasses",
    "InferencePool": "inferencepools",
}


def plural_for(kind: str) -> str:
    """The resource name of `kind` (`Pod` -> `pods`, `Policy` -> `policies`)."""
    if kind in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[kind]
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def collection_path(api_version: str, plural: str, namespace: str | None) -> str:
    """`/api/v1/namespaces/ns/pods` or `/apis/group/version/plural` for cluster scope."""
    prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        return f"{prefix}/namespaces/{namespace}/{plural}"
    return f"{prefix}/{plural}"


def object_path(ref: ObjectRef, subresource: str | None = None) -> str:
    path = f"{collection_path(ref.api_version, ref.plural or plural_for(ref.kind), ref.namespace)}/{ref.name}"
    return f"{path}/{subresource}" if subresource else path


def ref_of(manifest: dict[str, Any], plural: str | None = None) -> ObjectRef:
    """The `ObjectRef` naming a manifest (apiVersion, kind, metadata.name/namespace)."""
    metadata = manifest.get("metadata") or {}
    missing = [
        field
        for field, value in (
            ("apiVersion", manifest.get("apiVersion")),
            ("kind", manifest.get("kind")),
            ("metadata.name", metadata.get("name")),
        )
        if not value
    ]
    if missing:
        raise ValueError(
            f"manifest is missing {', '.join(missing)}: every object the product writes needs "
            f"apiVersion, kind and metadata.name (got keys {sorted(manifest)})"
        )
    return ObjectRef(
        api_version=str(manifest["apiVersion"]),
        kind=str(manifest["kind"]),
        name=str(metadata["name"]),
        namespace=metadata.get("namespace") or None,
        plural=plural,
        uid=metadata.get("uid") or None,
    )


def without_silent_status_retries(api_client: ApiClient) -> None:
    """Stop urllib3 from sleeping on 429/503 Retry-After inside a request.

    urllib3's default policy retries idempotent requests three times, sleeping for each
    Retry-After, without the activity heartbeating or the Temporal UI showing why. The
    retry belongs to Temporal, which honours the same Retry-After as `next_retry_delay`.
    Connection retries stay (nothing reached the server). A client configured with its own
    `retries` is left as its owner set it.
    """
    configuration = getattr(api_client, "configuration", None)
    if configuration is None or configuration.retries is not None:
        return
    pool_manager = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if pool_manager is not None:
        pool_manager.connection_pool_kw["retries"] = urllib3.util.Retry(
            total=3, connect=3, read=0, status=0, redirect=3, respect_retry_after_header=False
        )


class KubeRest:
    """JSON in, JSON out; non-2xx answers raise the client's `ApiException`.

    In a thread-pool activity a request keeps the activity heartbeating while it waits
    (`activities.keep_alive`); an async activity's client is made with `keep_alive=False`."""

    def __init__(self, api_client: ApiClient, *, keep_alive: bool = True) -> None:
        self.api_client = api_client
        self.keep_alive = keep_alive
        without_silent_status_retries(api_client)

    def _send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None,
        body: Any,
        content_type: str | None,
        timeout: Any,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        verb, url, headers, body, post = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        # The one place every request passes: counted and timed here (`activities.kube_metrics`).
        started, code = time.monotonic(), None
        try:
            with keep_alive.waiting() if self.keep_alive else contextlib.nullcontext():
                response = self.api_client.call_api(verb, url, headers, body, post, _request_timeout=timeout)
            code = response.status
            return response
        finally:
            kube_metrics.record(method, path, query or [], code, time.monotonic() - started)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        response = self._send(method, path, query, body, content_type, REQUEST_TIMEOUT)
        data = response.read()
        text = data.decode("utf-8", errors="replace") if data else ""
        if not 200 <= response.status <= 299:
            error = ApiException(status=response.status, reason=response.reason, body=text)
            error.headers = response.headers
            raise error
        if not text:
            return {}
        parsed = json.loads(text)
        return parsed if isinstance(parsed, dict) else {"value": parsed}

    def get(self, path: str, query: list[tuple[str, Any]] | None = None) -> dict[str, Any]:
        return self.request("GET", path, query=query)

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return self.get(path)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def watch_lines(
        self,
        path: str,
        query: list[tuple[str, Any]],
        read_timeout: float,
        on_open: Callable[[Any], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Events of a watch request, one dict per line, until the server ends the stream.

        The read timeout bounds how long a silent stream may block, so a cut connection
        that never closes is noticed; the caller resumes from its last resourceVersion.
        `on_open` receives the raw urllib3 response, so another thread can close it.
        """
        response = self._send("GET", path, query, None, None, (10.0, read_timeout))
        if on_open is not None:
            on_open(response.response)
        try:
            if not 200 <= response.status <= 299:
                text = response.read().decode("utf-8", errors="replace")
                error = ApiException(status=response.status, reason=response.reason, body=text)
                error.headers = response.headers
                raise error
            buffer = b""
            for chunk in response.response.stream(amt=None, decode_content=False):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
        finally:
            response.response.release_conn()
            response.response.close()
