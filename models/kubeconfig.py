"""A workload cluster's kubeconfig, parsed and checked against reference §16 (no I/O).

A WorkloadCluster's kubeconfig Secret must carry everything needed to reach the cluster
inline: the current context resolves to a cluster and a user, the server is `https://`, the
CA is `certificate-authority-data` (not a file path, which would name a file on the
controller's disk), and the user is a bearer `token` or `client-certificate-data` +
`client-key-data`. Exec and auth-provider plugins are refused (they run programs on the
controller; off by default), and so is `insecure-skip-tls-verify`.

`parse_workload_kubeconfig(text)` returns the `ClusterAccess` a client is built from, or raises
`KubeConfigError` whose message names the field, its value and the fix: it becomes the
`BadKubeConfig` message of the WorkloadCluster's `Ready` condition.

Public API: `ClusterAccess`, `KubeConfigError`, `parse_workload_kubeconfig`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict


class KubeConfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the field, its value and the fix."""


class ClusterAccess(BaseModel):
    """What a client needs to reach one workload cluster, all of it inline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    context: str
    server: str
    ca_pem: bytes
    token: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    tls_server_name: str | None = None


def parse_workload_kubeconfig(text: str) -> ClusterAccess:
    """Parse `text` (kubeconfig YAML) and check §16's rules; raise `KubeConfigError` otherwise."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise KubeConfigError(f"the kubeconfig is not YAML ({_first_line(error)}): store a kubeconfig file") from error
    if not isinstance(document, dict):
        raise KubeConfigError(
            f"the kubeconfig is a {type(document).__name__}, not a mapping: store a kubeconfig file"
        )
    context_name = document.get("current-context")
    if not context_name:
        raise KubeConfigError("current-context is not set: name the context the product should use")
    context = _named(document, "contexts", "context", str(context_name), "current-context")
    cluster_name = str(context.get("cluster") or "")
    user_name = str(context.get("user") or "")
    if not cluster_name:
        raise KubeConfigError(f"contexts[{context_name}].context.cluster is not set: name a cluster of `clusters`")
    if not user_name:
        raise KubeConfigError(f"contexts[{context_name}].context.user is not set: name a user of `users`")
    cluster = _named(document, "clusters", "cluster", cluster_name, f"contexts[{context_name}].context.cluster")
    user = _named(document, "users", "user", user_name, f"contexts[{context_name}].context.user")
    where_cluster = f"clusters[{cluster_name}].cluster"
    where_user = f"users[{user_name}].user"
    server, ca_pem, server_name = _check_cluster(cluster, where_cluster)
    token, cert_pem, key_pem = _check_user(user, where_user)
    return ClusterAccess(
        context=str(context_name),
        server=server,
        ca_pem=ca_pem,
        token=token,
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
        tls_server_name=server_name,
    )


def _named(document: dict[str, Any], section: str, body: str, name: str, referrer: str) -> dict[str, Any]:
    """The `body` mapping of the entry called `name` in `document[section]`."""
    entries = document.get(section) or []
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, dict) and str(entry.get("name")) == name:
                value = entry.get(body)
                if not isinstance(value, dict):
                    raise KubeConfigError(f"{section}[{name}].{body} is not a mapping: fill it in")
                return value
    raise KubeConfigError(f"{referrer} {name!r} is not in `{section}`: add it, or point {referrer} at one that is")


def _check_cluster(cluster: dict[str, Any], where: str) -> tuple[str, bytes, str | None]:
    server = str(cluster.get("server") or "")
    if not server:
        raise KubeConfigError(f"{where}.server is not set: set the API server's https:// URL")
    if not server.startswith("https://"):
        raise KubeConfigError(
            f"{where}.server {server!r} is not https://: workload clusters are reached over TLS only; "
            f"use the API server's https:// URL"
        )
    if cluster.get("insecure-skip-tls-verify"):
        raise KubeConfigError(
            f"{where}.insecure-skip-tls-verify is {cluster.get('insecure-skip-tls-verify')!r}: the server's "
            f"certificate must be verified; remove it and put the CA in certificate-authority-data"
        )
    if cluster.get("certificate-authority") and not cluster.get("certificate-authority-data"):
        raise KubeConfigError(
            f"{where}.certificate-authority {cluster['certificate-authority']!r} is a file path: the controller "
            f"cannot read your files; put the base64 PEM CA in certificate-authority-data instead"
        )
    ca_pem = _inline_pem(cluster, "certificate-authority-data", where, "the cluster's base64 PEM CA")
    if ca_pem is None:
        raise KubeConfigError(
            f"{where}.certificate-authority-data is not set: put the cluster's base64 PEM CA there "
            f"(system roots are not used for workload clusters)"
        )
    server_name = cluster.get("tls-server-name")
    return server, ca_pem, str(server_name) if server_name else None


def _check_user(user: dict[str, Any], where: str) -> tuple[str | None, bytes | None, bytes | None]:
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            value = user[plugin]
            shown = value.get("command") or value.get("name") if isinstance(value, dict) else value
            raise KubeConfigError(
                f"{where}.{plugin} ({shown!r}) is set: {plugin} plugins run programs on the controller and "
                f"are off by default; put an inline `token` (or `client-certificate-data` and "
                f"`client-key-data`) in the kubeconfig instead"
            )
    for field in ("client-certificate", "client-key", "tokenFile"):
        if user.get(field):
            raise KubeConfigError(
                f"{where}.{field} {user[field]!r} is a file path: the controller cannot read your files; "
                f"put the credential inline ({_inline_name(field)})"
            )
    token = user.get("token")
    cert_pem = _inline_pem(user, "client-certificate-data", where, "the base64 PEM client certificate")
    key_pem = _inline_pem(user, "client-key-data", where, "the base64 PEM client key")
    if (cert_pem is None) != (key_pem is None):
        given, missing = (
            ("client-certificate-data", "client-key-data")
            if key_pem is None
            else ("client-key-data", "client-certificate-data")
        )
        raise KubeConfigError(f"{where}.{given} is set but {missing} is not: set both, or use a token")
    if not token and cert_pem is None:
        raise KubeConfigError(
            f"{where} has no inline credentials: set `token`, or `client-certificate-data` and `client-key-data`"
        )
    return (str(token) if token else None), cert_pem, key_pem


def _inline_name(field: str) -> str:
    return {"client-certificate": "client-certificate-data", "client-key": "client-key-data"}.get(field, "token")


def _inline_pem(section: dict[str, Any], field: str, where: str, what: str) -> bytes | None:
    value = section.get(field)
    if not value:
        return None
    try:
        decoded = base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError) as error:
        raise KubeConfigError(f"{where}.{field} is not base64 ({error}): put {what} there, base64-encoded") from error
    if b"-----BEGIN " not in decoded:
        raise KubeConfigError(f"{where}.{field} does not decode to PEM: put {what} there, base64-encoded")
    return decoded


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
