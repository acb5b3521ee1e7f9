"""Everything under deploy/ is something a cluster accepts and the product can run with.

- every YAML/JSON file parses; every Kubernetes object validates strictly against the
  schema of Kubernetes 1.31 (the k3s the k3s tests run) where one exists for its kind;
- the CRDs are well-formed `apiextensions.k8s.io/v1` definitions of the product's kinds;
- the kustomization installs the namespace, the CRDs, RBAC, config, worker and watcher, and
  the Deployments run the Dockerfile's image and entry points with settings `workers.config`
  reads;
- the examples pass admission and name each other;
- RBAC drift is a failure in both directions: every request the activities and the watcher
  send (measured against kubesim, `tests/unit/deploy_usage.py`) is allowed by
  `deploy/rbac.yaml`, and every grant there is used or listed below as granted ahead of use.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes.client import ApiClient

from activities.kube import KubeActivities
from activities.kube_nodes import NodeActivities
from models.admission import admit
from models.duration import parse_duration
from models.runtime import ClusterServingRuntime
from planning.rollout.canary.steps import gate_of
from planning.service.components import plan_components
from tests.unit.deploy_usage import EXAMPLES, Request, Usage, example_isvc, example_runtime, product_requests
from workers.config import Settings, env_var_names
from workers.prometheus import SCRAPE_INTERVAL_SECONDS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.31.0"
"""The minor version of `tests/k3s/conftest.py`'s K3S_IMAGE: what the k3s tests apply these to."""

NAMESPACE = "ome-system"
SERVICE_ACCOUNT = "ome-lifecycle"

GRANTED_AHEAD: dict[Request, str] = {
    **{
        Request("ome.io", "inferencereplicas/scale", verb): "the InferenceReplica scale subresource"
        for verb in ("get", "update", "patch")
    },
    Request("ome.io", "inferenceservices/finalizers", "update"): (
        "setting blockOwnerDeletion on owned objects, where OwnerReferencesPermissionEnforcement runs; "
        "an authorization check, never a request"
    ),
    Request("ome.io", "workloadclusters", "get"): "multi-cluster placement reads the workload clusters",
    **{
        Request("ome.io", "workloadclusters", verb): "multi-cluster placement reads the workload clusters"
        for verb in ("watch",)
    },
    **{
        Request("ome.io", "workloadclusters/status", verb): "each WorkloadCluster's Ready condition"
        for verb in ("update",)
    },
    **{
        Request("gateway.networking.k8s.io", "httproutes", verb): "the TrafficMap publisher's global HTTPRoute"
        for verb in ("watch", "patch")
    },
    Request("gateway.networking.k8s.io", "gateways", "get"): "the publisher reads the global Gateway's listeners",
    **{
        Request("inference.networking.k8s.io", "inferencepools", verb): "multi-cluster InferencePool export"
        for verb in ("get", "list", "watch")
    },
    Request("inference.networking.k8s.io", "inferencepools/status", "patch"): "InferencePool export status",
    **{
        Request("inference.networking.x-k8s.io", "inferencepoolimports", verb): "InferencePoolImports (spec 002)"
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete")
    },
    **{
        Request("inference.networking.x-k8s.io", "inferencepoolimports/status", verb): "InferencePoolImport status"
        for verb in ("get", "update", "patch")
    },
    Request("inference.networking.x-k8s.io", "inferencepoolimports/status", "patch"): (
        "the watcher's InferencePoolImport status.controllers entry (workers/watch/pool_import.py)"
    ),
    Request("", "namespaces", "create"): (
        "the watcher creates an InferencePoolImport's namespace on the control plane when missing"
    ),
}
"""Grants no activity exercises yet, each with the reason it is there."""

KIND_RESOURCES = {
    "Pod": ("", "pods"),
    "Node": ("", "nodes"),
    "Eviction": ("", "pods/eviction"),
    "Service": ("", "services"),
    "Event": ("", "events"),
    "ConfigMap": ("", "configmaps"),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
    "Deployment": ("apps", "deployments"),
    "PodGroup": ("scheduling.x-k8s.io", "podgroups"),
    "CustomResourceDefinition": ("apiextensions.k8s.io", "customresourcedefinitions"),
    "InferenceService": ("ome.io", "inferenceservices"),
    "InferenceReplica": ("ome.io", "inferencereplicas"),
}
"""Kinds the workflows and planners name, and the resource the RBAC test exercises for each."""


def _files(*suffixes: str) -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.suffix in suffixes)


def _documents(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".json":
        return [json.loads(path.read_text())]
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _objects() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object under deploy/ (the kustomization and Prometheus config excluded)."""
    return [
        (path, doc)
        for path in _files(".yaml", ".yml", ".json")
        for doc in _documents(path)
        if isinstance(doc, dict) and "apiVersion" in doc and doc.get("kind") != "Kustomization"
    ]


def _one(path: str, kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in _documents(DEPLOY / path) if doc.get("kind") == kind]
    return found


def _rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = _one("rbac.yaml", "ClusterRole")["rules"]
    return rules


def _granted() -> set[Request]:
    return {
        Request(group, resource, verb)
        for rule in _rules()
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


# --- parsing and schemas ------------------------------------------------------------------


def test_every_file_under_deploy_parses() -> None:
    files = _files(".yaml", ".yml", ".json")
    assert {p.name for p in files} >= {
        "rbac.yaml",
        "worker.yaml",
        "watcher.yaml",
        "kustomization.yaml",
        "qwen3-0-6b.json",
        "srt-qwen3-0-6b.yaml",
    }
    for path in files:
        assert _documents(path), f"{path.relative_to(ROOT)} holds no document"


def _crd_kinds() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the openAPIV3Schema of each CRD under deploy/crds, per served version."""
    kinds: dict[tuple[str, str], dict[str, Any]] = {}
    for _, doc in _objects():
        if doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for version in spec["versions"]:
            kinds[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    return kinds


CRD_SCHEMAS = _crd_kinds()
# The product's own kinds have no upstream schema: its models check the examples below. Other
# custom resources (the examples' InferencePool) are checked against the CRDs kubesim serves.
UPSTREAM_OBJECTS = [
    (path, doc)
    for path, doc in _objects()
    if not doc["apiVersion"].startswith("ome.io/") and (doc["apiVersion"], doc["kind"]) not in CRD_SCHEMAS
]
CUSTOM_OBJECTS = [
    (path, doc)
    for path, doc in _objects()
    if not doc["apiVersion"].startswith("ome.io/") and (doc["apiVersion"], doc["kind"]) in CRD_SCHEMAS
]


@pytest.mark.parametrize("path_and_doc", CUSTOM_OBJECTS, ids=lambda pd: f"{pd[0].name}:{pd[1]['kind']}")
def test_custom_objects_match_their_crd(path_and_doc: tuple[Path, dict[str, Any]]) -> None:
    path, doc = path_and_doc
    errors = list(jsonschema.Draft7Validator(CRD_SCHEMAS[(doc["apiVersion"], doc["kind"])]).iter_errors(doc))
    assert not errors, f"{path.relative_to(ROOT)}: {[e.message for e in errors]}"


def test_the_examples_hold_a_custom_resource_to_check() -> None:
    assert any(doc["kind"] == "InferencePool" for _, doc in CUSTOM_OBJECTS), CUSTOM_OBJECTS


@pytest.mark.parametrize("path_and_doc", UPSTREAM_OBJECTS, ids=lambda pd: f"{pd[0].name}:{pd[1]['kind']}")
def test_objects_validate_strictly(path_and_doc: tuple[Path, dict[str, Any]]) -> None:
    path, doc = path_and_doc
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        raise AssertionError(f"{path.relative_to(ROOT)} {doc['kind']}: {error}") from error


def test_strict_validation_catches_a_misspelt_field() -> None:
    # Proves the check above can fail: strict mode rejects what a cluster would drop silently.
    broken = copy.deepcopy(_one("worker.yaml", "Deployment"))
    broken["spec"]["template"]["spec"]["serviceAcountName"] = SERVICE_ACCOUNT
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_crds_define_the_product_kinds_as_apiextensions_v1() -> None:
    crds = {
        doc["spec"]["names"]["kind"]: (path, doc)
        for path, doc in _objects()
        if doc["kind"] == "CustomResourceDefinition"
    }
    assert set(crds) == {
        "InferenceService",
        "InferenceReplica",
        "ServingRuntime",
        "ClusterServingRuntime",
        "TrafficMap",
        "WorkloadCluster",
        "PodGroup",
        *GATEWAY_CRDS,
    }, "a new CRD needs its RBAC grants in deploy/rbac.yaml and a place in this test"
    granted_resources = {(r.group, r.resource) for r in _granted()}
    for kind, (path, crd) in crds.items():
        if kind in GATEWAY_CRDS:
            continue  # checked below: upstream's, not the product's
        where = path.relative_to(ROOT)
        spec = crd["spec"]
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1", where
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}", where
        assert path.name == f"{crd['metadata']['name']}.yaml", f"{where}: file name should be the CRD's name"
        assert spec["scope"] == (
            "Cluster" if kind in ("ClusterServingRuntime", "WorkloadCluster") else "Namespaced"
        )
        assert [v["name"] for v in spec["versions"] if v["storage"]] == [
            {"PodGroup": "v1alpha1", "HTTPRoute": "v1"}.get(kind, "v1beta1")
        ], f"{where}: exactly one storage version"
        for version in spec["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            assert schema["type"] == "object", f"{where}: a structural schema's root is an object"
            assert "status" in version.get("subresources", {}), f"{where}: status must be a subresource"
        resource = (spec["group"], spec["names"]["plural"])
        assert resource in granted_resources, f"{where}: deploy/rbac.yaml grants nothing on {kind}"


GATEWAY_CRDS = {
    "GatewayClass": ("v1", "Cluster", False),
    "Gateway": ("v1", "Namespaced", True),
    "HTTPRoute": ("v1", "Namespaced", True),
    "InferencePool": ("v1", "Namespaced", True),
    "InferencePoolImport": ("v1alpha1", "Namespaced", True),
}
"""Upstream CRDs (deploy/crds/gateway/) kubesim serves because the product writes or reads these
kinds: storage version, scope, and whether deploy/rbac.yaml grants the product something on it."""


def test_gateway_crds_are_upstreams_kinds_kubesim_preloads_and_kustomize_leaves_alone() -> None:
    granted_resources = {(r.group, r.resource) for r in _granted()}
    found = {}
    for path in sorted((DEPLOY / "crds" / "gateway").glob("*.yaml")):
        (crd,) = _documents(path)
        spec = crd["spec"]
        found[spec["names"]["kind"]] = crd
        version, scope, granted = GATEWAY_CRDS[spec["names"]["kind"]]
        assert path.name == f"{spec['names']['plural']}.{spec['group']}.yaml" == f"{crd['metadata']['name']}.yaml"
        assert spec["scope"] == scope
        assert [v["name"] for v in spec["versions"] if v["storage"]] == [version]
        assert all("status" in v["subresources"] for v in spec["versions"])
        assert ((spec["group"], spec["names"]["plural"]) in granted_resources) == granted, path.name
    assert set(found) == set(GATEWAY_CRDS)
    resources = _one("kustomization.yaml", "Kustomization")["resources"]
    assert not any("gateway" in r for r in resources), "a cluster's Gateway implementation installs these"


# --- installation ----------------------------------------------------------------------------


def test_kustomization_installs_everything_in_ome_system() -> None:
    kustomization = _one("kustomization.yaml", "Kustomization")
    resources = kustomization["resources"]
    for resource in resources:
        assert (DEPLOY / resource).is_file(), f"kustomization.yaml lists {resource}, which does not exist"
    required_crds = sorted(f"crds/{p.name}" for p in (DEPLOY / "crds").glob("*.yaml"))
    assert set(resources) >= {
        "namespace.yaml", "rbac.yaml", "worker.yaml", "watcher.yaml", "controller.yaml", "webhook.yaml", *required_crds
    }
    assert not any("optional" in r for r in resources), "the PodGroup CRD belongs to scheduler-plugins"
    namespaces = [
        doc["metadata"]["name"]
        for r in resources
        for doc in _documents(DEPLOY / r)
        if doc["kind"] == "Namespace"
    ]
    assert namespaces == [NAMESPACE]
    cluster_scoped = {
        "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"
    }
    for resource in resources:
        for doc in _documents(DEPLOY / resource):
            if doc["kind"] not in cluster_scoped:
                assert doc["metadata"].get("namespace") == NAMESPACE, (
                    f"{resource} {doc['kind']} outside {NAMESPACE}"
                )
    (image,) = kustomization["images"]
    for path in ("worker.yaml", "watcher.yaml", "controller.yaml", "webhook.yaml"):
        (container,) = _one(path, "Deployment")["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"{image['newName']}:{image['newTag']}", path


def test_binding_gives_the_role_to_the_deployments_account() -> None:
    account = _one("rbac.yaml", "ServiceAccount")["metadata"]
    binding = _one("rbac.yaml", "ClusterRoleBinding")
    assert (account["name"], account["namespace"]) == (SERVICE_ACCOUNT, NAMESPACE)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": _one("rbac.yaml", "ClusterRole")["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    for path in ("worker.yaml", "watcher.yaml"):
        assert _one(path, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == SERVICE_ACCOUNT


@pytest.mark.parametrize(
    "path, module",
    [
        ("worker.yaml", "workers"),
        ("watcher.yaml", "workers.watcher"),
        ("controller.yaml", "workers.controller"),
        ("webhook.yaml", "workers.webhook"),
    ],
)
def test_deployment_runs_the_entry_point_as_the_dockerfiles_user(path: str, module: str) -> None:
    pod = _one(path, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # The webhook takes flags (--in-cluster, ...) after its module.
    assert container["command"][:3] == ["python", "-m", module]
    user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert user is not None, "the Dockerfile should run as a numeric non-root user"
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == tuple(
        map(int, user.groups())
    )
    # namespace.yaml enforces the restricted Pod Security Standard: anything less is refused.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    namespace = _one("namespace.yaml", "Namespace")["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"
    names = {env["name"] for env in container.get("env", [])} - {"PYTHONDONTWRITEBYTECODE"}
    unknown = {name for name in names if name.startswith("OME_")} - env_var_names()
    assert not unknown, f"{path} sets {sorted(unknown)}, which workers/config.py does not read"
    assert [source["configMapRef"]["name"] for source in container["envFrom"]] == ["ome-lifecycle"]


def test_config_map_is_settings_the_processes_accept(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _one("config.yaml", "ConfigMap")["data"]
    assert set(data) <= env_var_names(), f"unknown variables {sorted(set(data) - env_var_names())}"
    for name in env_var_names():
        monkeypatch.delenv(name, raising=False)
    for name, value in data.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.temporal.address == data["OME_TEMPORAL__ADDRESS"]
    assert settings.temporal.task_queue == "ome-lifecycle"
    assert settings.kube.kubeconfig is None, "in a pod the service account is used, not a kubeconfig"


# --- examples --------------------------------------------------------------------------------


def test_examples_are_admitted_and_name_each_other() -> None:
    runtime = ClusterServingRuntime.model_validate(example_runtime())
    manifest = example_isvc()
    admission = admit(manifest, runtime=runtime.spec)
    assert admission.allowed, admission.denials
    assert not admission.warnings, admission.warnings
    assert admission.isvc is not None and admission.isvc.spec.runtime is not None
    assert admission.isvc.spec.runtime.name == runtime.metadata.name == "srt-qwen3-0-6b"
    (engine,) = plan_components(admission.isvc, runtime.spec)
    assert (engine.name, engine.mode, engine.multi_pod) == ("engine", "OMENative", False)
    assert engine.effective.runner is not None and engine.effective.runner.image, (
        "the runtime supplies the image"
    )
    assert (engine.min_replicas, engine.max_replicas) == (2, 2)


def test_the_fleet_example_is_admitted_with_four_engine_instances() -> None:
    runtime = ClusterServingRuntime.model_validate(example_runtime())
    admission = admit(_example("qwen3-0-6b-fleet.json"), runtime=runtime.spec)
    assert admission.allowed and not admission.warnings, (admission.denials, admission.warnings)
    assert admission.isvc is not None
    (engine,) = plan_components(admission.isvc, runtime.spec)
    assert (engine.mode, engine.min_replicas, engine.max_replicas) == ("OMENative", 4, 4)


def _example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return loaded


def test_the_rollout_group_examples_are_admitted_in_the_walkthroughs_order() -> None:
    """mistral-pd (seed 004), its new image, then its kv-v1 -> kv-v2 change: each admitted
    against the one before, and each change moves the engine and the decoder together."""
    runtime = ClusterServingRuntime.model_validate(
        yaml.safe_load((EXAMPLES / "srt-mistral-7b-instruct-pd.yaml").read_text())
    )
    order = ["mistral-pd.json", "mistral-pd-new-image.json", "mistral-pd-kv-v2.json"]
    previous = None
    revisions: list[dict[str, str]] = []
    for name in order:
        manifest = _example(name)
        admission = admit(manifest, previous, runtime=runtime.spec)
        assert admission.allowed, (name, admission.denials)
        assert admission.isvc is not None and admission.isvc.spec.runtime is not None
        assert admission.isvc.spec.runtime.name == runtime.metadata.name
        plans = plan_components(admission.isvc, runtime.spec)
        assert {(p.name, p.mode) for p in plans} == {("router", "OMENative"), ("engine", "OMENative"), ("decoder", "OMENative")}
        revisions.append({p.name: p.revision_hash for p in plans})
        previous = manifest
    for before, after in zip(revisions, revisions[1:], strict=False):
        assert before["engine"] != after["engine"] and before["decoder"] != after["decoder"]
        assert before["router"] == after["router"], "the router is in no group and the changes leave it alone"


def test_the_canary_examples_are_admitted_in_the_walkthroughs_order_and_fit_the_stacks_scrapes() -> None:
    """The canary walkthrough's mistral-pd, its bad image, then its good one: each admitted
    against the one before, each change moving the engine and the decoder; the analysis reads
    rates over enough of `make up`'s Prometheus scrapes, and the bad image is the one kubesim
    is told to fail."""
    runtime = ClusterServingRuntime.model_validate(
        yaml.safe_load((EXAMPLES / "srt-mistral-7b-instruct-pd.yaml").read_text())
    )
    order = ["mistral-pd-canary.json", "mistral-pd-canary-bad-image.json", "mistral-pd-canary-good-image.json"]
    previous = None
    revisions: list[dict[str, str]] = []
    for name in order:
        manifest = _example(name)
        admission = admit(manifest, previous, runtime=runtime.spec)
        assert admission.allowed and not admission.warnings, (name, admission.denials, admission.warnings)
        assert admission.isvc is not None and admission.isvc.spec.rollout is not None
        (group,) = admission.isvc.spec.rollout.groups or []
        assert group.components == ["engine", "decoder"] and group.canary is not None
        assert [gate_of(step) for step in group.canary.steps] == ["Analysis", "Manual", "Immediate"]
        revisions.append({p.name: p.revision_hash for p in plan_components(admission.isvc, runtime.spec)})
        previous = manifest
    for before, after in zip(revisions, revisions[1:], strict=False):
        assert before["engine"] != after["engine"] and before["decoder"] != after["decoder"]
        assert before["router"] == after["router"]
    analysis = group.canary.steps[0].analysis
    assert analysis is not None and analysis.initial_delay is not None
    # rate() needs two scrapes in its window; the first sample comes initialDelay after the step is ready.
    windows = {parse_duration(w) for m in analysis.metrics for w in re.findall(r"\[(\w+)\]", m.query)}
    assert windows and min(windows) >= 4 * SCRAPE_INTERVAL_SECONDS, windows
    assert parse_duration(analysis.initial_delay) >= 2 * SCRAPE_INTERVAL_SECONDS
    bad = json.loads((EXAMPLES / "kubesim-bad-image.json").read_text())
    assert bad["image"] == _example("mistral-pd-canary-bad-image.json")["spec"]["engine"]["runner"]["image"]
    assert bad["error_ratio"] > float(analysis.metrics[0].threshold)


# --- RBAC ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def usage() -> Usage:
    return await product_requests()


@pytest.fixture(scope="module")
def used(usage: Usage) -> set[Request]:
    assert sum(usage.counters.values()) > 0
    return usage.requests


@pytest.mark.kubesim
def test_the_measured_run_exercises_every_kube_activity(usage: Usage) -> None:
    # A new activity must join the measured run, or its requests would escape the RBAC check.
    registered = {
        method.__name__
        for method in [*KubeActivities(ApiClient()).activities(), *NodeActivities(ApiClient()).activities()]
    }
    assert usage.activities == registered, f"not exercised: {sorted(registered - usage.activities)}"


def _allowed(request: Request) -> bool:
    return any(
        request.group in rule["apiGroups"]
        and request.resource in rule["resources"]
        and request.verb in rule["verbs"]
        for rule in _rules()
    )


def test_rbac_has_no_wildcards_and_reads_secrets_and_config_maps_only_by_name() -> None:
    for rule in _rules():
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], (
                f"rbac.yaml: a wildcard in {field} grants more than the product uses"
            )
        if "configmaps" in rule["resources"]:
            # Only the migration audit (`<isvc>-ome-migration-audit`): read and written by name.
            assert rule["resources"] == ["configmaps"] and "list" not in rule["verbs"], (
                "rbac.yaml: ConfigMaps are read and written by name only, for the migration audit"
            )
        if "secrets" in rule["resources"]:
            # Canary analysis reads the one bearer-token Secret a canary names; listing or
            # watching would hand the worker every Secret of the cluster.
            assert rule["resources"] == ["secrets"] and rule["verbs"] == ["get"], (
                "rbac.yaml: Secrets are read by name only (get), for canary analysis bearer tokens"
            )


@pytest.mark.kubesim
async def test_rbac_allows_every_request_the_product_sends(used: set[Request]) -> None:
    missing = sorted(f"{r.verb} {r.resource}.{r.group or 'core'}" for r in used if not _allowed(r))
    assert not missing, f"deploy/rbac.yaml does not allow: {missing}; add these verbs to the ClusterRole"


@pytest.mark.kubesim
async def test_rbac_grants_nothing_unused(used: set[Request]) -> None:
    unused = sorted(
        f"{r.verb} {r.resource}.{r.group or 'core'}" for r in _granted() - used if r not in GRANTED_AHEAD
    )
    assert not unused, (
        f"deploy/rbac.yaml grants {unused}, which no activity or watch sends; remove them, or list them in "
        f"GRANTED_AHEAD with the reason"
    )
    stale = sorted(f"{r.verb} {r.resource}" for r in GRANTED_AHEAD if r in used or r not in _granted())
    assert not stale, f"GRANTED_AHEAD entries now used or no longer granted: {stale}"


@pytest.mark.kubesim
async def test_every_kind_the_workflows_name_is_exercised(used: set[Request]) -> None:
    # A workflow or planner that starts writing a new kind must extend the measured scenario.
    pattern = re.compile(r'(?:"kind":\s*|kind=)"([A-Z][A-Za-z]+)"')
    named = {
        kind
        for package in ("workflows", "planning", "activities")
        for source in (ROOT / package).glob("*.py")
        for kind in pattern.findall(source.read_text())
    } - {"DeleteOptions"}
    unknown = named - set(KIND_RESOURCES)
    assert not unknown, (
        f"code names kinds {sorted(unknown)}: add each to KIND_RESOURCES, write it in "
        f"tests/unit/deploy_usage.py's measured run, and grant what that run reports in deploy/rbac.yaml"
    )
    touched = {(r.group, r.resource) for r in used}
    assert {KIND_RESOURCES[kind] for kind in named} <= touched
