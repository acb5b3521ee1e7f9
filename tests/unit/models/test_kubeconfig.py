"""`models.kubeconfig`: a workload cluster's kubeconfig, checked against reference §16."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from models.kubeconfig import ClusterAccess, KubeConfigError, parse_workload_kubeconfig

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any) -> str:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "wa",
                "cluster": cluster
                if cluster is not None
                else {"server": "https://10.0.0.1:6443", "certificate-authority-data": b64(PEM)},
            }
        ],
        "users": [{"name": "admin", "user": user if user is not None else {"token": "secret-token"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "wa", "user": "admin"}}],
        "current-context": "ctx",
    }
    document.update(top)
    return yaml.safe_dump(document)


def test_token_kubeconfig_is_accepted() -> None:
    access = parse_workload_kubeconfig(kubeconfig())
    assert access == ClusterAccess(context="ctx", server="https://10.0.0.1:6443", ca_pem=PEM, token="secret-token")


def test_client_certificate_kubeconfig_is_accepted() -> None:
    access = parse_workload_kubeconfig(
        kubeconfig(user={"client-certificate-data": b64(PEM), "client-key-data": b64(KEY)})
    )
    assert (access.token, access.client_cert_pem, access.client_key_pem) == (None, PEM, KEY)


def test_tls_server_name_is_kept() -> None:
    cluster = {"server": "https://1.2.3.4", "certificate-authority-data": b64(PEM), "tls-server-name": "api.wa"}
    assert parse_workload_kubeconfig(kubeconfig(cluster=cluster)).tls_server_name == "api.wa"


CA = {"certificate-authority-data": b64(PEM)}

REFUSED = [
    ("not yaml", "key: [unclosed", ["not YAML"]),
    ("a list", "- a\n- b\n", ["list, not a mapping"]),
    ("no current context", kubeconfig(**{"current-context": ""}), ["current-context is not set"]),
    ("unknown context", kubeconfig(**{"current-context": "other"}), ["current-context 'other'", "`contexts`"]),
    (
        "context without cluster",
        kubeconfig(contexts=[{"name": "ctx", "context": {"user": "admin"}}]),
        ["contexts[ctx].context.cluster is not set"],
    ),
    (
        "context naming a missing user",
        kubeconfig(contexts=[{"name": "ctx", "context": {"cluster": "wa", "user": "nobody"}}]),
        ["contexts[ctx].context.user 'nobody' is not in `users`"],
    ),
    ("no server", kubeconfig(cluster={**CA}), ["clusters[wa].cluster.server is not set"]),
    (
        "plain http",
        kubeconfig(cluster={"server": "http://10.0.0.1:8080", **CA}),
        ["clusters[wa].cluster.server 'http://10.0.0.1:8080' is not https://", "https:// URL"],
    ),
    (
        "insecure skip verify",
        kubeconfig(cluster={"server": "https://x", "insecure-skip-tls-verify": True, **CA}),
        ["clusters[wa].cluster.insecure-skip-tls-verify is True", "certificate-authority-data"],
    ),
    (
        "CA file path",
        kubeconfig(cluster={"server": "https://x", "certificate-authority": "/etc/ca.pem"}),
        ["clusters[wa].cluster.certificate-authority '/etc/ca.pem' is a file path", "certificate-authority-data"],
    ),
    (
        "no CA",
        kubeconfig(cluster={"server": "https://x"}),
        ["clusters[wa].cluster.certificate-authority-data is not set"],
    ),
    (
        "CA not base64",
        kubeconfig(cluster={"server": "https://x", "certificate-authority-data": "%%%"}),
        ["certificate-authority-data is not base64"],
    ),
    (
        "CA not PEM",
        kubeconfig(cluster={"server": "https://x", "certificate-authority-data": b64(b"hello")}),
        ["certificate-authority-data does not decode to PEM"],
    ),
    (
        "exec plugin",
        kubeconfig(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}}),
        ["users[admin].user.exec ('aws') is set", "off by default", "inline `token`"],
    ),
    (
        "auth-provider plugin",
        kubeconfig(user={"auth-provider": {"name": "gcp"}}),
        ["users[admin].user.auth-provider ('gcp') is set", "off by default"],
    ),
    (
        "token file",
        kubeconfig(user={"tokenFile": "/var/run/token"}),
        ["users[admin].user.tokenFile '/var/run/token' is a file path", "(token)"],
    ),
    (
        "client cert file",
        kubeconfig(user={"client-certificate": "/c.pem", "client-key": "/k.pem"}),
        ["users[admin].user.client-certificate '/c.pem' is a file path", "client-certificate-data"],
    ),
    (
        "cert without key",
        kubeconfig(user={"client-certificate-data": b64(PEM)}),
        ["client-certificate-data is set but client-key-data is not"],
    ),
    ("no credentials", kubeconfig(user={"username": "u"}), ["users[admin].user has no inline credentials"]),
]


@pytest.mark.parametrize(("text", "fragments"), [(t, f) for _, t, f in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_kubeconfigs_name_the_field_and_the_fix(text: str, fragments: list[str]) -> None:
    with pytest.raises(KubeConfigError) as caught:
        parse_workload_kubeconfig(text)
    for fragment in fragments:
        assert fragment in str(caught.value)
