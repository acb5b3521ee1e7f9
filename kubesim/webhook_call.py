"""One HTTPS call to an admission webhook, as kube-apiserver's webhook client makes it: the URL
from `clientConfig` (a `url`, or a `service` reference as `https://<name>.<namespace>.svc:<port>
<path>`), `?timeout=<n>s` appended, TLS verified against `caBundle` (the system roots without one),
the whole call bounded by `timeoutSeconds`.

A failed call raises `CallFailed` whose text reads like the Go client's error
(`Post "<url>": dial tcp ...: connect: connection refused`, `... context deadline exceeded`,
`tls: failed to verify certificate: x509: certificate signed by unknown authority`), because
kubectl users see that text inside the API server's `failed calling webhook` message.

Service references: kubesim runs no cluster network, so `<name>.<namespace>.svc` resolves only
through `KUBESIM_WEBHOOK_SERVICE_HOSTS` (`name.namespace.svc:port=host:port,...`, empty by default),
which points a service at a local address (TLS still checks the certificate against the service
name, as the API server does); any other service fails as an unresolvable host.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import os
import ssl
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

Object = dict[str, Any]
SERVICE_HOSTS_ENV = "KUBESIM_WEBHOOK_SERVICE_HOSTS"
_FAILED = "failed to call webhook: "


class CallFailed(Exception):
    """The webhook could not be called, or answered with something that is not an AdmissionReview;
    the text is the reason in the API server's `failed calling webhook "<name>": <reason>`."""


def service_hosts() -> dict[str, str]:
    """`KUBESIM_WEBHOOK_SERVICE_HOSTS` as {"name.namespace.svc:port": "host:port"}."""
    out: dict[str, str] = {}
    for item in (os.environ.get(SERVICE_HOSTS_ENV) or "").split(","):
        service, _, address = item.strip().partition("=")
        if service and address:
            out[service.strip()] = address.strip()
    return out


def webhook_url(client_config: Object, timeout_seconds: int) -> str:
    """The URL the API server posts to, `?timeout=<n>s` included."""
    service = client_config.get("service")
    if service:
        path = service.get("path") or ""
        base = f"https://{service['name']}.{service['namespace']}.svc:{service.get('port', 443)}{path}"
    else:
        base = client_config.get("url") or ""
    parts = urlsplit(base)
    query = f"{parts.query}&timeout={timeout_seconds}s" if parts.query else f"timeout={timeout_seconds}s"
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


@functools.lru_cache(maxsize=64)
def _tls_context(ca_bundle: str) -> ssl.SSLContext:
    if not ca_bundle:
        return ssl.create_default_context()
    try:
        pem = base64.b64decode(ca_bundle, validate=True).decode()
        return ssl.create_default_context(cadata=pem)
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
        raise CallFailed(f"could not get REST client: unable to load root certificates: {exc}") from exc


def _tls_text(exc: aiohttp.ClientSSLError, host: str) -> str:
    cert_error = getattr(exc, "certificate_error", None)
    detail = getattr(cert_error, "verify_message", "") or str(exc)
    if "Hostname mismatch" in detail or "IP address mismatch" in detail:
        return f"tls: failed to verify certificate: x509: certificate is not valid for {host}"
    if "expired" in detail:
        return "tls: failed to verify certificate: x509: certificate has expired or is not yet valid"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    return f"remote error: tls: {detail}"


def _transport_text(exc: BaseException, host: str, port: int) -> str:
    """A Go net/http error text for a failed request."""
    if isinstance(exc, TimeoutError):
        return "context deadline exceeded"
    if isinstance(exc, aiohttp.ClientSSLError):
        return _tls_text(exc, host)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"dial tcp: lookup {host}: no such host"
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return f"dial tcp {host}:{port}: connect: connection refused"
        return f"dial tcp {host}:{port}: {exc.os_error.strerror or exc.os_error}"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return "EOF"
    return str(exc) or type(exc).__name__


def _http_status_text(status: int, body: bytes) -> str:
    """client-go's message for a non-2xx answer that is not a Status."""
    try:
        decoded = json.loads(body)
        if isinstance(decoded, dict) and decoded.get("kind") == "Status" and decoded.get("message"):
            return str(decoded["message"])
    except ValueError:
        pass
    if status == 404:
        return "the server could not find the requested resource"
    text = body.decode(errors="replace").strip()
    return f'an error on the server ("{text}") has prevented the request from succeeding'


async def post_review(client_config: Object, timeout_seconds: int, review: Object) -> Object:
    """POST the AdmissionReview and return the decoded answer, or raise `CallFailed`."""
    url = webhook_url(client_config, timeout_seconds)
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    target, server_hostname = url, None
    if client_config.get("service"):
        mapped = service_hosts().get(f"{host}:{port}")
        if mapped is None:
            raise CallFailed(f'{_FAILED}Post "{url}": dial tcp: lookup {host}: no such host')
        target, server_hostname = urlunsplit(("https", mapped, parts.path, parts.query, "")), host
    tls = _tls_context(client_config.get("caBundle") or "")
    try:
        async with asyncio.timeout(timeout_seconds):
            async with aiohttp.ClientSession() as session, session.post(
                target, json=review, ssl=tls, server_hostname=server_hostname,
                headers={"Accept": "application/json"},
            ) as resp:
                body = await resp.read()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise CallFailed(f'{_FAILED}Post "{url}": {_transport_text(exc, host, port)}') from exc
    if not 200 <= resp.status < 300:
        raise CallFailed(_FAILED + _http_status_text(resp.status, body))
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise CallFailed(f"{_FAILED}couldn't get version/kind; json parse error: {exc}") from exc
    if not isinstance(answer, dict):
        raise CallFailed(f"{_FAILED}the answer is not an AdmissionReview object")
    return answer
