"""Plain HTTP requests to a kubesim standing in for a remote workload cluster
(`workload_kubesim`), carrying its bearer token or not."""

from __future__ import annotations

import json
import ssl
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kubesim.handle import KubeSim
from tests.fixtures.kubesim import WORKLOAD_TOKEN as TOKEN


def trusting(sim: KubeSim) -> ssl.SSLContext:
    """A client TLS context trusting the cluster's CA (and checking its name, 127.0.0.1)."""
    ca_pem = sim.cluster.credentials.ca_pem if sim.cluster.credentials else b""
    with tempfile.NamedTemporaryFile(suffix=".crt") as ca:
        Path(ca.name).write_bytes(ca_pem)
        return ssl.create_default_context(cafile=ca.name)


def request(sim: KubeSim, method: str, url: str, token: str | None = TOKEN, body: Any = None) -> tuple[int, Any]:
    """(status, JSON body) of one request; `url` is a path on the API server or a full URL."""
    full = url if url.startswith("http") else sim.url + url
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(full, data=data, method=method, headers=headers)
    context = trusting(sim) if full.startswith("https") else None
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode()
