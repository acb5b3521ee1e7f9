"""The admission webhook's CA and serving certificate: made once, kept, and reused while good.

The API server calls the webhook over HTTPS and trusts it through the CA in the
ValidatingWebhookConfiguration's `caBundle`; nothing else needs that CA, so the webhook makes
its own (`kubesim.tls.make_credentials`, the one place certificates are made). They are kept in
one of two places, both holding the same three PEM entries `ca.crt`, `tls.crt`, `tls.key`:

- a directory (`--cert-dir`, e.g. `.data/webhook/` for the local stack);
- the Secret `ome-system/ome-webhook-server-cert` (type `kubernetes.io/tls` plus `ca.crt`) in a
  cluster, so every replica serves the same certificate and a restart keeps it.

At start, kept credentials are reused when the certificate is issued by the kept CA, matches
its key, names every host the webhook answers at, and has more than `RENEW_BEFORE` left;
otherwise new ones replace them. Replicas racing to write the Secret settle on the one that
landed first (create and replace are guarded by AlreadyExists and resourceVersion).

Public API: `ensure_in_directory`, `ensure_in_secret`, `problems`, `Credentials`,
`SECRET_NAME`, `SECRET_NAMESPACE`, `RENEW_BEFORE`.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import logging
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from kubesim.tls import Credentials, make_credentials

__all__ = ["Credentials", "RENEW_BEFORE", "SECRET_NAME", "SECRET_NAMESPACE", "ensure_in_directory",
           "ensure_in_secret", "problems"]

logger = logging.getLogger(__name__)

SECRET_NAME = "ome-webhook-server-cert"
SECRET_NAMESPACE = "ome-system"
CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"
RENEW_BEFORE = dt.timedelta(days=30)
"""Credentials closer than this to expiry are replaced at start: a month leaves room for a
process that runs for weeks without a restart (certificates last `kubesim.tls.VALIDITY`)."""
SECRET_ATTEMPTS = 3


def _fresh_credentials(hosts: tuple[str, ...]) -> Credentials:
    return make_credentials(hosts, organization="ome-webhook-server", server_name="ome-webhook-server")


def problems(credentials: Credentials, hosts: tuple[str, ...], now: dt.datetime | None = None) -> list[str]:
    """Why `credentials` cannot serve `hosts` any more; empty when they can."""
    now = now or dt.datetime.now(dt.UTC)
    try:
        ca = x509.load_pem_x509_certificate(credentials.ca_pem)
        cert = x509.load_pem_x509_certificate(credentials.cert_pem)
        key = serialization.load_pem_private_key(credentials.key_pem, password=None)
    except ValueError as error:
        return [f"unreadable PEM: {error}"]
    found: list[str] = []
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        found.append("the certificate is not issued by the CA")
    if key.public_key() != cert.public_key():
        found.append("the key does not match the certificate")
    for name, certificate in (("CA", ca), ("certificate", cert)):
        if certificate.not_valid_after_utc - now < RENEW_BEFORE:
            found.append(f"the {name} expires at {certificate.not_valid_after_utc:%Y-%m-%d %H:%M}Z")
        if certificate.not_valid_before_utc > now:
            found.append(f"the {name} is valid only from {certificate.not_valid_before_utc:%Y-%m-%d %H:%M}Z")
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [*found, "the certificate names no hosts"]
    named = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} | set(names.get_values_for_type(x509.DNSName))
    missing = [host for host in hosts if _normal(host) not in named]
    if missing:
        found.append(f"the certificate does not name {', '.join(missing)}")
    return found


def _normal(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def ensure_in_directory(directory: Path, hosts: tuple[str, ...]) -> Credentials:
    """The credentials kept in `directory`, made (and written) when absent or no longer good."""
    paths = [directory / CA_FILE, directory / CERT_FILE, directory / KEY_FILE]
    if all(path.is_file() for path in paths):
        kept = Credentials(*(path.read_bytes() for path in paths))
        found = problems(kept, hosts)
        if not found:
            logger.info("reusing the webhook certificate in %s", directory)
            return kept
        logger.info("replacing the webhook certificate in %s: %s", directory, "; ".join(found))
    credentials = _fresh_credentials(hosts)
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in zip(paths, (credentials.ca_pem, credentials.cert_pem, credentials.key_pem), strict=True):
        path.write_bytes(text)
    paths[2].chmod(0o600)  # the private key
    return credentials


def ensure_in_secret(
    core: CoreV1Api, hosts: tuple[str, ...], namespace: str = SECRET_NAMESPACE, name: str = SECRET_NAME
) -> Credentials:
    """The credentials kept in the Secret, which is created (or replaced) when absent or no
    longer good; when another replica writes it first, its credentials are the ones used."""
    for _ in range(SECRET_ATTEMPTS):
        try:
            secret = core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            secret = None
        if secret is not None:
            kept = _from_secret_data(secret.data or {})
            found = problems(kept, hosts) if kept is not None else ["it lacks ca.crt, tls.crt or tls.key"]
            if not found:
                logger.info("reusing the webhook certificate in Secret %s/%s", namespace, name)
                assert kept is not None
                return kept
            logger.info("replacing the webhook certificate in Secret %s/%s: %s", namespace, name, "; ".join(found))
        credentials = _fresh_credentials(hosts)
        # The client sends a dict as it is; its type hints name only its own models.
        body: Any = _secret_body(credentials, namespace, name)
        try:
            if secret is None:
                core.create_namespaced_secret(namespace, body)
            else:
                assert secret.metadata is not None
                body["metadata"]["resourceVersion"] = secret.metadata.resource_version
                core.replace_namespaced_secret(name, namespace, body)
        except ApiException as error:
            if error.status != 409:
                raise
            continue  # another replica wrote it first: read what it wrote
        return credentials
    raise RuntimeError(f"Secret {namespace}/{name} kept changing while the webhook wrote its certificate")


def _from_secret_data(data: dict[str, Any]) -> Credentials | None:
    try:
        return Credentials(*(base64.b64decode(data[key]) for key in (CA_FILE, CERT_FILE, KEY_FILE)))
    except (KeyError, ValueError):
        return None


def _secret_body(credentials: Credentials, namespace: str, name: str) -> dict[str, Any]:
    def encoded(text: bytes) -> str:
        return base64.b64encode(text).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "ome-webhook-server", "app.kubernetes.io/part-of": "omeflow"},
        },
        "type": "kubernetes.io/tls",
        "data": {
            CA_FILE: encoded(credentials.ca_pem),
            CERT_FILE: encoded(credentials.cert_pem),
            KEY_FILE: encoded(credentials.key_pem),
        },
    }
