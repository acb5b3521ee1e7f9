"""The kind registry: built-in resource types, types added by CRDs, and API discovery documents.

Discovery (`/api`, `/apis`, `/apis/{group}/{version}`) is generated from this registry so that
dynamic clients and `kubectl`-style tools find exactly the kinds the server can answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    """One REST resource (a plural under a group/version) and the subresources it serves."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    status: bool = False
    # scale subresource paths as in a CRD: specReplicasPath, statusReplicasPath, labelSelectorPath
    scale: tuple[tuple[str, str], ...] = ()
    extra_subresources: tuple[str, ...] = ()
    builtin: bool = True
    categories: tuple[str, ...] = ()
    list_kind: str = ""
    printer_columns: tuple[tuple[tuple[str, Any], ...], ...] = field(default=(), compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def scale_paths(self) -> dict[str, str]:
        return dict(self.scale)

    def subresources(self) -> list[str]:
        subs = list(self.extra_subresources)
        if self.status:
            subs.append("status")
        if self.scale:
            subs.append("scale")
        return subs


def _core(plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", plural, kind, namespaced, **kw)


_DEPLOYMENT_SCALE = (
    ("specReplicasPath", ".spec.replicas"),
    ("statusReplicasPath", ".status.replicas"),
    ("labelSelectorPath", ".status.selector"),
)

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core("namespaces", "Namespace", False, short_names=("ns",), status=True),
    _core("nodes", "Node", False, short_names=("no",), status=True),
    _core(
        "pods",
        "Pod",
        short_names=("po",),
        status=True,
        extra_subresources=("eviction", "binding"),
        categories=("all",),
    ),
    _core("services", "Service", short_names=("svc",), status=True, categories=("all",)),
    _core("endpoints", "Endpoints", short_names=("ep",)),
    _core("configmaps", "ConfigMap", short_names=("cm",)),
    _core("secrets", "Secret"),
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _core("events", "Event", short_names=("ev",)),
    _core("resourcequotas", "ResourceQuota", short_names=("quota",), status=True),
    ResourceType(
        "apps", "v1", "deployments", "Deployment", True, ("deploy",), True, _DEPLOYMENT_SCALE, categories=("all",)
    ),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), True, _DEPLOYMENT_SCALE, categories=("all",)),
    ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), status=True),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
        ("crd", "crds"), status=True,
    ),
    ResourceType("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                 "ValidatingWebhookConfiguration", False),
)


class Registry:
    """Resource types by (group, plural), plus the lookups the router and discovery need."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str], ResourceType] = {}
        for rt in BUILTIN_TYPES:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._types[rt.key] = rt

    def remove(self, group: str, plural: str) -> None:
        self._types.pop((group, plural), None)

    def get(self, group: str, plural: str) -> ResourceType | None:
        return self._types.get((group, plural))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self._types.get((group, plural))
        if rt is None or rt.version != version:
            return None
        return rt

    def all(self) -> list[ResourceType]:
        return list(self._types.values())

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for rt in self._types.values():
            if rt.group:
                versions = out.setdefault(rt.group, [])
                if rt.version not in versions:
                    versions.append(rt.version)
        return out

    # ---- discovery documents -------------------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        }

    def api_group_list(self) -> dict[str, Any]:
        groups = []
        for group, versions in sorted(self.groups().items()):
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_group(self, group: str) -> dict[str, Any] | None:
        versions = self.groups().get(group)
        if not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries, "preferredVersion": entries[0]}

    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        found = [rt for rt in self._types.values() if rt.group == group and rt.version == version]
        if not found:
            return None
        resources: list[dict[str, Any]] = []
        for rt in sorted(found, key=lambda r: r.plural):
            entry: dict[str, Any] = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": VERBS,
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            for sub in rt.subresources():
                sub_kind = {"scale": "Scale", "eviction": "Eviction", "binding": "Binding"}.get(sub, rt.kind)
                sub_group = {"scale": "autoscaling", "eviction": "policy"}.get(sub)
                sub_entry: dict[str, Any] = {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": sub_kind,
                    "verbs": ["create"] if sub in ("eviction", "binding") else ["get", "patch", "update"],
                }
                if sub_group:
                    sub_entry["group"] = sub_group
                    sub_entry["version"] = "v1"
                resources.append(sub_entry)
        group_version = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def resource_type_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The served resource types a CustomResourceDefinition declares (one per served version)."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    out: list[ResourceType] = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subs = version.get("subresources") or spec.get("subresources") or {}
        scale = subs.get("scale")
        scale_paths: tuple[tuple[str, str], ...] = ()
        if scale is not None:
            scale_paths = tuple(
                (k, scale[k]) for k in ("specReplicasPath", "statusReplicasPath", "labelSelectorPath") if k in scale
            )
        columns = tuple(tuple(sorted(col.items())) for col in version.get("additionalPrinterColumns", []))
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames", [])),
                status="status" in subs,
                scale=scale_paths,
                builtin=False,
                categories=tuple(names.get("categories", [])),
                list_kind=names.get("listKind", names["kind"] + "List"),
                printer_columns=columns,
            )
        )
    # The registry keys one version per plural: prefer the storage version, else the first served.
    storage = [v["name"] for v in spec.get("versions", []) if v.get("storage")]
    out.sort(key=lambda rt: 0 if storage and rt.version == storage[0] else 1)
    return out[:1]
