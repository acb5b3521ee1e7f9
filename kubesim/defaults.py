"""Defaulting and admission on create, per kind: the fields a real API server fills in so that
every object served carries what the official client's models require (container
`imagePullPolicy`, Service `clusterIP`, a Pod's default tolerations, a CRD's `status`...).
"""

from __future__ import annotations

import base64
import itertools
from typing import TYPE_CHECKING, Any

from kubesim.timing import timestamp
from kubesim.webhook_config import default_configuration

if TYPE_CHECKING:
    from kubesim.allocation import ServiceAddresses

Object = dict[str, Any]

DEFAULT_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", 300),
    ("node.kubernetes.io/unreachable", 300),
)


def default_container(container: Object) -> None:
    image = container.get("image", "")
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in container:
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    # Requests default to limits for any resource that has a limit but no request.
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in container.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("fieldRef")
        if ref:
            ref.setdefault("apiVersion", "v1")


def default_pod_spec(spec: Object) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for container in itertools.chain(spec.get("initContainers") or [], spec.get("containers") or []):
        default_container(container)


def _qos_class(spec: Object) -> str:
    containers = spec.get("containers") or []
    requests_seen = limits_seen = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        if not limits or "cpu" not in limits or "memory" not in limits:
            guaranteed = False
        if any(requests.get(k, limits.get(k)) != limits.get(k) for k in ("cpu", "memory")):
            guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod(pod: Object) -> None:
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    # DefaultTolerationSeconds admission: tolerate an unreachable / not-ready node for 300s.
    tolerations = spec.setdefault("tolerations", [])
    for key, seconds in DEFAULT_TOLERATIONS:
        if not any(t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists") for t in tolerations):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
            )
    pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}


def default_deployment(deploy: Object) -> None:
    spec = deploy.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy["type"] = "RollingUpdate"
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    deploy["status"] = {}


def default_replicaset(rs: Object) -> None:
    spec = rs.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    rs["status"] = {"replicas": 0}


def default_service(svc: Object, taken: ServiceAddresses) -> None:
    """Defaults of a new Service; a clusterIP and nodePorts not `taken` by stored Services."""
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if not spec.get("clusterIP"):
        spec["clusterIP"] = taken.cluster_ips.first_free()
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    exposed = spec["type"] in ("NodePort", "LoadBalancer")
    if exposed:
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    chosen: set[int] = set()
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
        if exposed and not port.get("nodePort"):
            # The default NodePort range is 30000-32767.
            port["nodePort"] = taken.node_ports.first_free(skip=chosen)
            chosen.add(port["nodePort"])
    svc["status"] = {"loadBalancer": {}}


def default_namespace(ns: Object) -> None:
    ns.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = ns["metadata"]["name"]
    ns["spec"] = {"finalizers": ["kubernetes"]}
    ns["status"] = {"phase": "Active"}


def default_secret(secret: Object) -> None:
    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def default_pdb(pdb: Object) -> None:
    pdb.setdefault("spec", {})
    pdb["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def default_crd(crd: Object) -> None:
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    names.setdefault("singular", names.get("kind", "").lower())
    names.setdefault("listKind", names.get("kind", "") + "List")
    spec.setdefault("scope", "Namespaced")
    spec.setdefault("conversion", {"strategy": "None"})
    now = timestamp()
    crd["status"] = {
        "acceptedNames": dict(names),
        "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")],
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    }


def default_node(node: Object) -> None:
    node.setdefault("spec", {})
    node.setdefault("status", {})


DEFAULTERS = {
    ("", "pods"): default_pod,
    ("apps", "deployments"): default_deployment,
    ("apps", "replicasets"): default_replicaset,
    ("", "namespaces"): default_namespace,
    ("", "secrets"): default_secret,
    ("", "nodes"): default_node,
    ("policy", "poddisruptionbudgets"): default_pdb,
    ("apiextensions.k8s.io", "customresourcedefinitions"): default_crd,
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): default_configuration,
}
