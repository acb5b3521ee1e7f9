"""The ENDPOINTS column of `kubectl get endpoints`, as the API server's printer fills it: each
ready address with each port, a headless Service's port-less subset by its addresses alone,
three at most and a count of the rest."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.tables import _endpoints


def subset(ips: list[str], ports: list[int] | None = None, not_ready: list[str] | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {"addresses": [{"ip": ip} for ip in ips]}
    if ports is not None:
        shown["ports"] = [{"port": port} for port in ports]
    if not_ready:
        shown["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return shown


@pytest.mark.parametrize(
    ("subsets", "shown"),
    [
        pytest.param([], None, id="no subsets: <none>"),
        pytest.param([subset(["10.0.0.1", "10.0.0.2"], [8080])], "10.0.0.1:8080,10.0.0.2:8080", id="one port"),
        pytest.param([subset(["10.0.0.1"])], "10.0.0.1", id="headless without ports: the addresses"),
        pytest.param(
            [subset(["10.0.0.1", "10.0.0.2"], [80, 443])],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...",
            id="by port, then address; three at most",
        ),
        pytest.param([subset([], [80], not_ready=["10.0.0.9"])], "", id="not ready addresses are not shown"),
        pytest.param([subset(["fd00::1"], [80])], "[fd00::1]:80", id="IPv6 in brackets"),
    ],
)
def test_the_endpoints_column(subsets: list[dict[str, Any]], shown: str | None) -> None:
    assert _endpoints({"subsets": subsets}) == shown
