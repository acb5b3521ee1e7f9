"""OpenAPI v3 as an API server publishes it: `/openapi/v3` lists one document per served
group-version, and `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>` hold that
group-version's schemas, which `kubectl apply` needs for client-side validation and for the
strategic-merge-patch metadata (`x-kubernetes-patch-strategy`, list map keys).

The built-in schemas come from the Kubernetes JSON schema that `kubernetes-validate` ships (its
newest pinned release, which is also the version `/version` reports); they are JSON Schema
2020-12, so each is rewritten to OpenAPI 3.0 (`type: [t, "null"]` becomes `type: t`, `$defs`
references become `components/schemas`, quantities and int-or-strings become the string formats
the API server declares). Custom resources get the `openAPIV3Schema` of their CRD.

`/openapi/v2` is served as JSON (Swagger 2.0, every schema in `definitions`). client-go asks for
it as gnostic protobuf only; that gets 406 Not Acceptable, as from an API server that cannot
produce the asked-for type, and kubectl then works from v3.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate

from kubesim.resources import Registry, ResourceType
from kubesim.store import Store

Object = dict[str, Any]
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
_SCHEMA_ROOT = Path(kubernetes_validate.__file__).resolve().parent / "kubernetes-json-schema"
_DEFS_REF = "#/$defs/"
_COMPONENT_REF = "#/components/schemas/"
# Types every group-version document carries, as the API server's do (request options, Status).
_COMMON = ("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
           "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList")
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def schema_version() -> str:
    """The newest Kubernetes release whose schema kubernetes-validate ships, e.g. "1.37.0"."""
    found = []
    for path in _SCHEMA_ROOT.glob("v*-local"):
        match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)-local", path.name)
        if match and (path / "_definitions.json").exists():
            found.append(tuple(int(g) for g in match.groups()))
    if not found:
        raise RuntimeError(f"kubernetes-validate ships no schema under {_SCHEMA_ROOT}: reinstall kubernetes-validate")
    return ".".join(str(n) for n in max(found))


def _to_openapi3(node: Any) -> Any:
    """One JSON Schema 2020-12 node as OpenAPI 3.0."""
    if isinstance(node, list):
        return [_to_openapi3(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: Object = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if len(kinds) == 1:
                out["type"] = kinds[0]
            continue
        if key == "$ref" and isinstance(value, str):
            out["$ref"] = _COMPONENT_REF + value[len(_DEFS_REF):] if value.startswith(_DEFS_REF) else value
            continue
        if key in ("properties", "patternProperties", "$defs") and isinstance(value, dict):
            out[key] = {name: _to_openapi3(sub) for name, sub in value.items()}
            continue
        out[key] = _to_openapi3(value)
    if "$ref" in out and len(out) > 1:
        # OpenAPI 3.0 ignores a $ref's siblings; the API server wraps such refs in allOf.
        ref = out.pop("$ref")
        out["allOf"] = [{"$ref": ref}]
    return out


@functools.lru_cache(maxsize=1)
def builtin_schemas() -> dict[str, Object]:
    path = _SCHEMA_ROOT / f"v{schema_version()}-local" / "_definitions.json"
    defs = json.loads(path.read_text())["$defs"]
    schemas = {name: _to_openapi3(schema) for name, schema in defs.items()}
    schemas[_INT_OR_STRING] = {"description": defs[_INT_OR_STRING].get("description", "An int or a string."),
                               "type": "string", "format": "int-or-string"}
    schemas[_QUANTITY] = {"description": defs[_QUANTITY].get("description", "A quantity such as 100m or 2Gi."),
                          "type": "string"}
    return schemas


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_COMPONENT_REF):
            found.add(ref[len(_COMPONENT_REF):])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _closure(roots: list[str], schemas: dict[str, Object]) -> dict[str, Object]:
    out: dict[str, Object] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in out or name not in schemas:
            continue
        out[name] = schemas[name]
        found: set[str] = set()
        _refs(schemas[name], found)
        pending.extend(found - out.keys())
    return out


def _gvks(schema: Object) -> list[tuple[str, str, str]]:
    return [(g.get("group", ""), g.get("version", ""), g.get("kind", ""))
            for g in schema.get("x-kubernetes-group-version-kind") or []]


def _crd_component_name(group: str, version: str, kind: str) -> str:
    # The API server names a CR's schema after its reversed group, like io.ome.v1beta1.InferenceService.
    return ".".join([*reversed(group.split(".")), version, kind])


def _crd_schemas(crd: Object, version: str) -> dict[str, Object]:
    spec = crd.get("spec") or {}
    group, names = spec.get("group", ""), spec.get("names") or {}
    served: Object = next((v for v in spec.get("versions") or [] if v.get("name") == version), {})
    raw = ((served.get("schema") or spec.get("validation") or {}).get("openAPIV3Schema")) or {"type": "object"}
    schema: Object = json.loads(json.dumps(raw))
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": "APIVersion of this object."}
    props["kind"] = {"type": "string", "description": "Kind of this object."}
    props["metadata"] = {"allOf": [{"$ref": _COMPONENT_REF + _OBJECT_META}]}
    kind = names.get("kind", "")
    list_kind = names.get("listKind") or kind + "List"
    schema["x-kubernetes-group-version-kind"] = [{"group": group, "version": version, "kind": kind}]
    name = _crd_component_name(group, version, kind)
    list_schema: Object = {
        "type": "object", "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": _COMPONENT_REF + name}},
            "metadata": {"allOf": [{"$ref": _COMPONENT_REF + "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}]},
        },
        "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": list_kind}],
    }
    return {name: schema, _crd_component_name(group, version, list_kind): list_schema}


def component_name(rt: ResourceType) -> str:
    """The schema name of a resource type's kind: io.k8s.api.core.v1.Pod, io.ome.v1beta1.InferenceService."""
    if rt.builtin:
        name = _builtin_names().get((rt.group, rt.version, rt.kind))
        if name:
            return name
    return _crd_component_name(rt.group, rt.version, rt.kind)


@functools.lru_cache(maxsize=1)
def _builtin_names() -> dict[tuple[str, str, str], str]:
    return {gvk: name for name, schema in builtin_schemas().items() for gvk in _gvks(schema)}


def _query(name: str, kind: str = "string") -> Object:
    return {"name": name, "in": "query", "schema": {"type": kind, "uniqueItems": True}}


def _paths(rt: ResourceType) -> Object:
    """The item path of one resource type with the operations and query parameters the API server
    declares; kubectl reads the PATCH operation's `fieldValidation` parameter to learn that the
    server validates fields itself (and then skips downloading a schema to validate locally)."""
    prefix = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    ref = {"$ref": _COMPONENT_REF + component_name(rt)}
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    body = {"content": {"*/*": {"schema": ref}}, "required": True}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}
    # kubectl apply uses the schema's patch metadata only where the server takes strategic merge patches.
    patches = ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"]
    if rt.builtin:
        patches.append("application/strategic-merge-patch+json")
    write = [_query("dryRun"), _query("fieldManager"), _query("fieldValidation")]

    def op(action: str, verb: str, params: list[Object], **extra: Any) -> Object:
        return {"operationId": f"{verb}{rt.kind}", "parameters": params, "responses": ok,
                "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk, **extra}

    item = {
        "get": op("get", "read", []),
        "put": op("put", "replace", write, requestBody=body),
        "patch": op("patch", "patch", [*write, _query("force", "boolean")],
                    requestBody={"content": {media: {"schema": {"type": "object"}} for media in patches},
                                 "required": True}),
        "delete": op("delete", "delete", [_query("dryRun"), _query("gracePeriodSeconds", "integer"),
                                          _query("propagationPolicy")]),
        "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
                      + ([{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}]
                         if rt.namespaced else []),
    }
    collection = {"post": op("post", "create", write, requestBody=body)}
    return {f"{prefix}{scope}/{rt.plural}/{{name}}": item, f"{prefix}{scope}/{rt.plural}": collection}


class OpenApi:
    """Builds and caches the OpenAPI v3 documents for the types a registry serves."""

    def __init__(self, registry: Registry, store: Store) -> None:
        self.registry = registry
        self.store = store
        self._cache: dict[str, tuple[str, bytes]] = {}

    def _served(self) -> dict[str, list[ResourceType]]:
        out: dict[str, list[ResourceType]] = {}
        for rt in self.registry.all():
            path = f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}"
            out.setdefault(path, []).append(rt)
        return out

    def _crd_stamp(self, types: list[ResourceType]) -> str:
        stamps = []
        for crd in self.store.list(CRD_KEY):
            if any(rt.group == (crd.get("spec") or {}).get("group") for rt in types if not rt.builtin):
                stamps.append(f"{crd['metadata']['name']}@{crd['metadata'].get('resourceVersion', '')}")
        return ",".join(sorted(stamps))

    def document(self, path: str) -> bytes | None:
        """The JSON document for "api/v1" or "apis/<group>/<version>", or None if not served."""
        types = self._served().get(path)
        if not types:
            return None
        stamp = self._crd_stamp(types)
        cached = self._cache.get(path)
        if cached and cached[0] == stamp:
            return cached[1]
        builtins = builtin_schemas()
        roots: list[str] = list(_COMMON)
        extra: dict[str, Object] = {}
        wanted = {(rt.group, rt.version, rt.kind) for rt in types if rt.builtin}
        wanted |= {(rt.group, rt.version, rt.list_kind or rt.kind + "List") for rt in types if rt.builtin}
        for name, schema in builtins.items():
            if any(gvk in wanted for gvk in _gvks(schema)):
                roots.append(name)
        crds = {(c.get("spec") or {}).get("names", {}).get("plural"): c for c in self.store.list(CRD_KEY)}
        for rt in types:
            crd = crds.get(rt.plural)
            if not rt.builtin and crd is not None and (crd.get("spec") or {}).get("group") == rt.group:
                extra.update(_crd_schemas(crd, rt.version))
        schemas = _closure(roots + [_OBJECT_META], builtins)
        for schema in extra.values():
            found: set[str] = set()
            _refs(schema, found)
            schemas.update(_closure(sorted(found), builtins))
        schemas.update(extra)
        paths: Object = {}
        for rt in types:
            paths.update(_paths(rt))
        doc = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": f"v{schema_version()}"},
               "paths": paths, "components": {"schemas": dict(sorted(schemas.items()))}}
        body = json.dumps(doc, separators=(",", ":")).encode()
        self._cache[path] = (stamp, body)
        return body

    def index(self) -> Object:
        """`/openapi/v3`: each served group-version and the URL (with a content hash) to fetch it."""
        paths: Object = {}
        for path in sorted(self._served()):
            body = self.document(path)
            if body is None:
                continue
            digest = hashlib.sha512(body).hexdigest().upper()
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
        return {"paths": paths}

    def v2(self) -> bytes:
        """`/openapi/v2` as JSON: every built-in and custom resource schema under `definitions`."""
        stamp = self._crd_stamp([rt for rt in self.registry.all() if not rt.builtin])
        cached = self._cache.get("v2")
        if cached and cached[0] == stamp:
            return cached[1]
        schemas = dict(builtin_schemas())
        for crd in self.store.list(CRD_KEY):
            for version in (crd.get("spec") or {}).get("versions") or []:
                if version.get("served", True):
                    schemas.update(_crd_schemas(crd, version.get("name", "")))
        doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": f"v{schema_version()}"},
               "paths": {}, "definitions": dict(sorted(schemas.items()))}
        body = json.dumps(doc, separators=(",", ":")).replace(_COMPONENT_REF, "#/definitions/").encode()
        self._cache["v2"] = (stamp, body)
        return body

    def schema_of(self, rt: ResourceType) -> Object | None:
        """The OpenAPI schema objects of this type are checked against, or None if it has none."""
        if rt.builtin:
            return builtin_schemas().get(component_name(rt))
        for crd in self.store.list(CRD_KEY):
            spec = crd.get("spec") or {}
            if spec.get("group") == rt.group and (spec.get("names") or {}).get("plural") == rt.plural:
                return _crd_schemas(crd, rt.version)[_crd_component_name(rt.group, rt.version, rt.kind)]
        return None

    def unknown_fields(self, rt: ResourceType, body: Any) -> list[str]:
        """Paths of the fields in `body` its schema does not declare (what fieldValidation=Strict
        rejects), like "spec.template.spec.containers[0].imagePullPolice". Keys starting with "$"
        are strategic-merge-patch directives, not fields."""
        schema = self.schema_of(rt)
        found: list[str] = []
        if schema is not None:
            _walk(schema, body, "", found, builtin_schemas())
        return found


def _resolve(schema: Object, schemas: dict[str, Object]) -> Object:
    while True:
        ref = schema.get("$ref")
        if ref is None and len(schema.get("allOf") or []) == 1:
            ref = schema["allOf"][0].get("$ref")
        if not isinstance(ref, str) or not ref.startswith(_COMPONENT_REF):
            return schema
        schema = schemas.get(ref[len(_COMPONENT_REF):], {})


def _walk(schema: Object, value: Any, path: str, found: list[str], schemas: dict[str, Object]) -> None:
    schema = _resolve(schema, schemas)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is None and not isinstance(extra, dict):
            return  # a free-form object (RawExtension, FieldsV1, JSON): anything goes
        for key, sub in value.items():
            if key.startswith("$"):
                continue
            where = f"{path}.{key}" if path else key
            if props is not None and key in props:
                _walk(props[key], sub, where, found, schemas)
            elif isinstance(extra, dict):
                _walk(extra, sub, where, found, schemas)
            else:
                found.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{index}]", found, schemas)
