"""Registering the local stack's simulated workload clusters on its control plane, as an
operator registers real ones: per cluster a kubeconfig Secret `ome/wlc-<name>-kubeconfig` (key
`kubeconfig`) and a cluster-scoped WorkloadCluster pointing at it (spec reference §16), and once
a global Gateway `ome/global-gateway` for the publisher to attach its HTTPRoutes to (§21).

Every write is idempotent: a restarted stack finds its objects and brings them up to date (the
workload clusters' ports and tokens change on every start), never failing on AlreadyExists.
The kubernetes client is synchronous: the stack calls these on a thread.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import kubernetes.client
from kubernetes.client.exceptions import ApiException

NAMESPACE = "ome"
SECRET_KEY = "kubeconfig"
CLUSTER_NAME_LABEL = "ome.io/cluster-name"
MANAGED_BY = {"app.kubernetes.io/managed-by": "omeflow-stack"}
OME = ("ome.io", "v1beta1")
GATEWAY_API = ("gateway.networking.k8s.io", "v1")
GLOBAL_GATEWAY = "global-gateway"
GLOBAL_HOSTNAME = "*.global.example.com"
GATEWAY_CLASS = "kubesim"
"""The GatewayClass kubesim's simulated gateway controller runs (`kubesim.gateway`)."""


def secret_name(cluster: str) -> str:
    return f"wlc-{cluster}-kubeconfig"


def _create_or_patch(create: Callable[[], Any], patch: Callable[[], Any]) -> None:
    try:
        create()
    except ApiException as error:
        if error.status != 409:
            raise
        patch()


def ensure_namespace(core: kubernetes.client.CoreV1Api) -> None:
    try:
        namespace: Any = {"metadata": {"name": NAMESPACE}}
        core.create_namespace(namespace)
    except ApiException as error:
        if error.status != 409:
            raise


def register(api_client: kubernetes.client.ApiClient, cluster: str, kubeconfig: str) -> None:
    """Write (or bring up to date) the cluster's kubeconfig Secret and its WorkloadCluster."""
    core = kubernetes.client.CoreV1Api(api_client)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    ensure_namespace(core)
    labels = {CLUSTER_NAME_LABEL: cluster, **MANAGED_BY}
    data = {SECRET_KEY: base64.b64encode(kubeconfig.encode()).decode()}
    secret: Any = {
        "metadata": {"name": secret_name(cluster), "namespace": NAMESPACE, "labels": labels},
        "type": "Opaque",
        "data": data,
    }
    _create_or_patch(
        lambda: core.create_namespaced_secret(NAMESPACE, secret),
        lambda: core.patch_namespaced_secret(
            secret_name(cluster), NAMESPACE, {"metadata": {"labels": labels}, "data": data}
        ),
    )
    spec = {
        "clusterSource": {
            "kubeConfig": {
                "secretRef": {"name": secret_name(cluster), "namespace": NAMESPACE},
                "key": SECRET_KEY,
            }
        }
    }
    workload_cluster = {
        "apiVersion": f"{OME[0]}/{OME[1]}",
        "kind": "WorkloadCluster",
        "metadata": {"name": cluster, "labels": labels},
        "spec": spec,
    }
    _create_or_patch(
        lambda: custom.create_cluster_custom_object(*OME, "workloadclusters", workload_cluster),
        lambda: custom.patch_cluster_custom_object(
            *OME, "workloadclusters", cluster, {"metadata": {"labels": labels}, "spec": spec}
        ),
    )


def ensure_global_gateway(api_client: kubernetes.client.ApiClient) -> str:
    """Create `ome/global-gateway` (HTTP on port 80 for `*.global.example.com`) unless it exists;
    answers its `namespace/name`, what the publisher's global gateway setting takes."""
    core = kubernetes.client.CoreV1Api(api_client)
    ensure_namespace(core)
    gateway = {
        "apiVersion": f"{GATEWAY_API[0]}/{GATEWAY_API[1]}",
        "kind": "Gateway",
        "metadata": {"name": GLOBAL_GATEWAY, "namespace": NAMESPACE, "labels": dict(MANAGED_BY)},
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "listeners": [
                {
                    "name": "http",
                    "hostname": GLOBAL_HOSTNAME,
                    "port": 80,
                    "protocol": "HTTP",
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                }
            ],
        },
    }
    try:
        kubernetes.client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            *GATEWAY_API, NAMESPACE, "gateways", gateway
        )
    except ApiException as error:
        if error.status != 409:
            raise  # an existing one is the user's to change
    return f"{NAMESPACE}/{GLOBAL_GATEWAY}"
