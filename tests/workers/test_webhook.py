"""The admission webhook: its answer to a review (pure), and the HTTPS process against kubesim.

The pure part (`workers.webhook_review.review`) is checked answer by answer: allowed, refused
with kubectl's text, warnings, UPDATE rules that need the old object, the UPDATEs it lets
through without admission, and bodies that are no AdmissionReview. The process part starts
the real server beside kubesim in local mode: it makes its certificate files, writes the
ValidatingWebhookConfiguration with its URL and CA, and answers a review over TLS verified with
that CA; in-cluster mode keeps the certificate in the Secret and patches the CA into the
configuration deploy/webhook.yaml carries.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import kubernetes
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from kubernetes.client import AdmissionregistrationV1Api, CoreV1Api, CustomObjectsApi

from kubesim.handle import KubeSim
from kubesim.resources import ResourceType
from models.runtime import ClusterServingRuntime, ServingRuntimeSpec
from tests.unit.deploy_usage import _request_of as request_of
from workers.webhook import RuntimeReader, RuntimeUnavailable, WebhookOptions, application, start
from workers.webhook_certs import ensure_in_directory, ensure_in_secret, problems
from workers.webhook_registration import CONFIGURATION_NAME, WEBHOOK_NAME, patch_ca_bundle, webhook_entry
from workers.webhook_review import WEBHOOK_PATH, MalformedReview, review

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "deploy" / "examples"
RUNTIME_DOC: dict[str, Any] = yaml.safe_load((EXAMPLES / "srt-qwen3-0-6b.yaml").read_text())
RUNTIME = ClusterServingRuntime.model_validate(RUNTIME_DOC).spec
VALID: dict[str, Any] = json.loads((EXAMPLES / "qwen3-0-6b.json").read_text())
RESOURCE = {"group": "ome.io", "version": "v1beta1", "resource": "inferenceservices"}


def _review(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None,
            **request: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "0b2a-uid", "operation": operation, "resource": RESOURCE,
                    "namespace": "spread-demo", **request},
    }
    if obj is not None:
        body["request"]["object"] = obj
    if old is not None:
        body["request"]["oldObject"] = old
    return body


class Runtimes:
    """A runtime reader that records what it was asked."""

    def __init__(self, runtime: ServingRuntimeSpec | None = RUNTIME) -> None:
        self.runtime = runtime
        self.asked: list[tuple[str, str]] = []

    def __call__(self, namespace: str, name: str) -> ServingRuntimeSpec | None:
        self.asked.append((namespace, name))
        return self.runtime


def _edit(base: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    edited = copy.deepcopy(base)
    edited["metadata"].update(metadata)
    return edited


def _too_many_replicas() -> dict[str, Any]:
    bad = copy.deepcopy(VALID)
    bad["spec"]["engine"]["minReplicas"] = 5
    return bad


REPLICAS_DENIAL = (
    "spec.engine.minReplicas (5) must not exceed maxReplicas (2); raise maxReplicas or lower minReplicas "
    "(InvalidReplicas)"
)


# --- the review, without HTTP --------------------------------------------------------------


def test_a_valid_create_is_allowed_with_the_uid_and_apiversion_echoed() -> None:
    runtimes = Runtimes()
    answer = review(_review("CREATE", VALID), runtimes)
    assert answer == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "0b2a-uid", "allowed": True},
    }
    assert runtimes.asked == [("spread-demo", "srt-qwen3-0-6b")]


def test_a_refusal_is_forbidden_with_every_denial_one_a_line() -> None:
    bad = _too_many_replicas()
    bad["spec"]["engine"]["worker"] = {"size": 0}
    response = review(_review("CREATE", bad), Runtimes())["response"]
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": REPLICAS_DENIAL + "\nspec.engine.worker.size must be at least 1, got 0 (InvalidWorkerSize)",
    }


def test_warnings_come_back_as_warnings() -> None:
    short = _edit(VALID, annotations={"ome.io/rollout-ready-timeout": "30s"})
    response = review(_review("CREATE", short), Runtimes())["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        'metadata.annotations["ome.io/rollout-ready-timeout"] "30s" is under 1m, so a canary step may fail before '
        "its Instances are ready; use a longer timeout (RolloutTimeoutTooShort)"
    ]


def test_the_runtime_counts_the_components_it_declares() -> None:
    # The engine comes from the runtime alone: a group naming it is an orphan without the runtime.
    grouped = copy.deepcopy(VALID)
    del grouped["spec"]["engine"]
    grouped["spec"]["rollout"] = {"groups": [{"components": ["engine"]}]}
    assert review(_review("CREATE", grouped), Runtimes())["response"]["allowed"] is True
    refused = review(_review("CREATE", grouped), Runtimes(None))["response"]
    assert refused["allowed"] is False and "(OrphanCoordinationGroup)" in refused["status"]["message"]


def test_no_runtime_named_asks_for_none() -> None:
    unnamed = copy.deepcopy(VALID)
    del unnamed["spec"]["runtime"]
    runtimes = Runtimes()
    review(_review("CREATE", unnamed), runtimes)
    assert runtimes.asked == []


def test_an_object_without_a_namespace_takes_the_requests() -> None:
    bare = copy.deepcopy(VALID)
    del bare["metadata"]["namespace"]
    runtimes = Runtimes()
    assert review(_review("CREATE", bare, namespace="elsewhere"), runtimes)["response"]["allowed"] is True
    assert runtimes.asked == [("elsewhere", "srt-qwen3-0-6b")]


def test_server_fields_of_the_object_are_not_the_users_manifest() -> None:
    served = _edit(VALID, uid="3f0c", resourceVersion="12", generation=1, generateName="qwen-",
                   creationTimestamp="2026-01-01T00:00:00Z", finalizers=["ome.io/isvc-teardown"],
                   managedFields=[{"manager": "kubectl"}],
                   annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"})
    served["status"] = {"observedGeneration": 1}
    assert review(_review("CREATE", served), Runtimes())["response"] == {"uid": "0b2a-uid", "allowed": True}


def test_a_malformed_migration_request_annotation_is_refused_when_written() -> None:
    request = _edit(VALID, annotations={"ome.io/migration-request-v1-abc": "not json"})
    response = review(_review("CREATE", request), Runtimes())["response"]
    assert response["allowed"] is False
    assert response["status"]["message"].endswith("(InvalidMigrationRequest)")


def test_an_update_is_judged_against_the_old_object() -> None:
    placed = copy.deepcopy(VALID)
    placed["spec"]["placement"] = {"policy": "ClusterAffinity", "mode": "Single"}
    # Dropping ClusterAffinity is refused only as a change from an object that had it.
    assert review(_review("CREATE", VALID), Runtimes())["response"]["allowed"] is True
    response = review(_review("UPDATE", VALID, placed), Runtimes())["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "spec.placement.policy: ClusterAffinity cannot be removed once set; keep policy: ClusterAffinity "
        "(InvalidPlacement)"
    )


def test_an_update_of_a_non_control_annotation_is_admitted() -> None:
    bad = _too_many_replicas()
    labelled = _edit(bad, annotations={"ome.io/traffic-drain": "true"})
    response = review(_review("UPDATE", labelled, bad), Runtimes())["response"]
    assert response["allowed"] is False and response["status"]["message"] == REPLICAS_DENIAL


@pytest.mark.parametrize("change", [
    {"finalizers": ["ome.io/isvc-teardown"]},
    {"annotations": {"ome.io/relayed-annotations": '{"ome.io/rollout-paused": "freeze"}'}},
    {"annotations": {"ome.io/rollout-paused": "freeze"}},
    {"resourceVersion": "99", "generation": 7},
], ids=["finalizer", "relay-record", "pause", "server-fields"])
def test_an_update_that_leaves_spec_and_annotations_alone_is_not_admitted(change: dict[str, Any]) -> None:
    # Even an object admission would refuse: metadata-only writes must not be blocked by it.
    bad = _too_many_replicas()
    runtimes = Runtimes()
    response = review(_review("UPDATE", _edit(bad, **change), bad), runtimes)["response"]
    assert response == {"uid": "0b2a-uid", "allowed": True}
    assert runtimes.asked == []


MIGRATION_KEY = "ome.io/migration-request-v1-0b2a"
BAD_MIGRATION = '{"schemaVersion":"v2"}'


def test_a_malformed_migration_request_annotated_onto_an_object_is_refused() -> None:
    """`kubectl annotate isvc x ome.io/migration-request-v1-<uuid>='{"schemaVersion":"v2"}'`:
    only an annotation changes, and OME's webhook refuses it."""
    annotated = _edit(VALID, annotations={MIGRATION_KEY: BAD_MIGRATION})
    response = review(_review("UPDATE", annotated, VALID), Runtimes())["response"]
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(f"migration request {MIGRATION_KEY}: ")
    assert response["status"]["message"].endswith("(InvalidMigrationRequest)")


def test_a_migration_request_changed_to_a_malformed_one_is_refused() -> None:
    good = json.dumps({"component": "engine", "instance": 0, "from_node": "gpu-node-1"})
    before = _edit(VALID, annotations={MIGRATION_KEY: good})
    after = _edit(VALID, annotations={MIGRATION_KEY: BAD_MIGRATION})
    assert review(_review("UPDATE", after, before), Runtimes())["response"]["allowed"] is False


@pytest.mark.parametrize("edit", ["spec", "annotation", "metadata-only"])
def test_a_malformed_migration_request_already_on_the_object_blocks_no_later_edit(edit: str) -> None:
    """A refused request left on the object (the controller records it) was judged when written."""
    old = _edit(VALID, annotations={MIGRATION_KEY: BAD_MIGRATION})
    new = copy.deepcopy(old)
    if edit == "spec":
        new["spec"]["engine"]["maxReplicas"] = 3
    elif edit == "annotation":
        new["metadata"]["annotations"]["ome.io/traffic-drain"] = "true"
    else:
        new["metadata"]["annotations"]["ome.io/relayed-annotations"] = json.dumps({MIGRATION_KEY: BAD_MIGRATION})
    response = review(_review("UPDATE", new, old), Runtimes())["response"]
    assert response["allowed"] is True, response


def test_an_update_of_an_object_being_deleted_is_not_admitted() -> None:
    deleting = _edit(_too_many_replicas(), deletionTimestamp="2026-01-01T00:00:00Z")
    assert review(_review("UPDATE", deleting, VALID), Runtimes())["response"]["allowed"] is True


@pytest.mark.parametrize("body", [
    _review("DELETE", None, VALID),
    _review("CONNECT", None),
    _review("CREATE", _too_many_replicas(), resource={"group": "", "version": "v1", "resource": "pods"}),
    _review("UPDATE", _too_many_replicas(), VALID, subResource="status"),
], ids=["delete", "connect", "other-resource", "status-subresource"])
def test_anything_else_is_allowed(body: dict[str, Any]) -> None:
    assert review(body, Runtimes())["response"] == {"uid": "0b2a-uid", "allowed": True}


def test_a_v1beta1_review_is_answered_in_kind() -> None:
    body = {**_review("CREATE", VALID), "apiVersion": "admission.k8s.io/v1beta1"}
    assert review(body, Runtimes())["apiVersion"] == "admission.k8s.io/v1beta1"


@pytest.mark.parametrize("body, says", [
    ([], "must be a JSON object"),
    ({"apiVersion": "v1", "kind": "Pod"}, "expected kind AdmissionReview"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "no request object"),
    ({**_review("CREATE", VALID), "request": {"operation": "CREATE"}}, "request.uid is missing"),
    ({**_review("CREATE", VALID), "request": {"uid": "u"}}, "request.operation is missing"),
    (_review("CREATE", None), "request.object must be the InferenceService object for CREATE"),
    (_review("UPDATE", VALID), "request.oldObject must be the InferenceService object for UPDATE"),
], ids=["not-object", "wrong-kind", "no-request", "no-uid", "no-operation", "no-object", "no-old-object"])
def test_a_malformed_review_says_what_is_wrong(body: Any, says: str) -> None:
    with pytest.raises(MalformedReview, match=says):
        review(body, Runtimes())


# --- certificates ----------------------------------------------------------------------------


def test_certificates_in_a_directory_are_made_once_and_reused(tmp_path: Path) -> None:
    made = ensure_in_directory(tmp_path / "webhook", ("127.0.0.1", "localhost"))
    assert {p.name for p in (tmp_path / "webhook").iterdir()} == {"ca.crt", "tls.crt", "tls.key"}
    assert (tmp_path / "webhook" / "tls.key").stat().st_mode & 0o077 == 0
    assert problems(made, ("127.0.0.1", "localhost")) == []
    assert ensure_in_directory(tmp_path / "webhook", ("localhost",)) == made
    # A host the certificate does not name: replaced.
    other = ensure_in_directory(tmp_path / "webhook", ("127.0.0.1", "webhook.example"))
    assert other.ca_pem != made.ca_pem
    assert problems(made, ("webhook.example",)) == ["the certificate does not name webhook.example"]


def test_certificates_that_do_not_belong_together_are_replaced(tmp_path: Path) -> None:
    first = ensure_in_directory(tmp_path / "a", ("127.0.0.1",))
    second = ensure_in_directory(tmp_path / "b", ("127.0.0.1",))
    (tmp_path / "a" / "ca.crt").write_bytes(second.ca_pem)
    assert problems(type(first)(second.ca_pem, first.cert_pem, first.key_pem), ("127.0.0.1",)) == [
        "the certificate is not issued by the CA"
    ]
    assert ensure_in_directory(tmp_path / "a", ("127.0.0.1",)).ca_pem not in (first.ca_pem, second.ca_pem)


def test_the_deployed_configuration_is_the_entry_the_webhook_writes() -> None:
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "webhook.yaml").read_text()))
    (configuration,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    assert configuration["metadata"]["name"] == CONFIGURATION_NAME
    (entry,) = configuration["webhooks"]
    assert entry == webhook_entry(entry["clientConfig"], "Fail")
    assert entry["clientConfig"]["service"] == {
        "name": "ome-webhook-server-service", "namespace": "ome-system", "path": WEBHOOK_PATH, "port": 443,
    }
    assert "caBundle" not in entry["clientConfig"], "the webhook fills it; apply must not reset it"
    (service,) = [d for d in docs if d["kind"] == "Service"]
    assert service["metadata"]["name"] == "ome-webhook-server-service"
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(443, "webhook")]


# --- the process against kubesim ---------------------------------------------------------------

CONFIGURATION_TYPE = ResourceType(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False
)


@pytest.fixture
def cluster(kubesim: KubeSim) -> KubeSim:
    """kubesim serving ValidatingWebhookConfigurations, and the example's ClusterServingRuntime."""
    if kubesim.cluster.registry.get(CONFIGURATION_TYPE.group, CONFIGURATION_TYPE.plural) is None:
        # Until kubesim serves admissionregistration.k8s.io itself (it calls no webhook here).
        kubesim.call(lambda: kubesim.cluster.registry.add(CONFIGURATION_TYPE))
    api = kubesim.api_client()
    CustomObjectsApi(api).create_cluster_custom_object("ome.io", "v1beta1", "clusterservingruntimes", RUNTIME_DOC)
    api.close()
    return kubesim


def _client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    return context


async def _post(url: str, ca_pem: bytes, body: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(
        url, data=json.dumps(body), headers={"Content-Type": "application/json"}, ssl=_client_context(ca_pem)
    ) as answer:
        text = await answer.text()
        return answer.status, (json.loads(text) if answer.content_type == "application/json" else text)


def _configuration(api: Any) -> dict[str, Any]:
    found: dict[str, Any] = api.sanitize_for_serialization(
        AdmissionregistrationV1Api(api).read_validating_webhook_configuration(CONFIGURATION_NAME)
    )
    return found


async def test_the_local_webhook_registers_itself_and_answers_over_tls(cluster: KubeSim, tmp_path: Path) -> None:
    api = cluster.api_client()
    options = WebhookOptions(port=0, cert_dir=tmp_path / "webhook", failure_policy="Ignore")
    running = await start(options, api)
    try:
        ca_pem = (tmp_path / "webhook" / "ca.crt").read_bytes()
        assert (tmp_path / "webhook" / "tls.crt").is_file() and (tmp_path / "webhook" / "tls.key").is_file()
        configuration = _configuration(api)
        (entry,) = configuration["webhooks"]
        url = f"https://127.0.0.1:{running.port}{WEBHOOK_PATH}"
        assert entry["name"] == WEBHOOK_NAME
        assert entry["clientConfig"] == {"url": url, "caBundle": base64.b64encode(ca_pem).decode()}
        assert entry["failurePolicy"] == "Ignore" and entry["timeoutSeconds"] == 10

        # The engine is declared by the ClusterServingRuntime in kubesim alone: read through the client.
        grouped = copy.deepcopy(VALID)
        del grouped["spec"]["engine"]
        grouped["spec"]["rollout"] = {"groups": [{"components": ["engine"]}]}
        status, answer = await _post(url, ca_pem, _review("CREATE", grouped))
        assert (status, answer["response"]) == (200, {"uid": "0b2a-uid", "allowed": True})
        status, answer = await _post(url, ca_pem, _review("CREATE", _too_many_replicas()))
        assert status == 200 and answer["response"]["status"]["message"] == REPLICAS_DENIAL

        status, text = await _post(url, ca_pem, {"kind": "Pod"})
        assert status == 400 and "malformed AdmissionReview" in text
        async with aiohttp.ClientSession() as session, session.get(
            f"https://localhost:{running.port}/healthz", ssl=_client_context(ca_pem)
        ) as health:
            assert health.status == 200
    finally:
        await running.stop()

    # A second start reuses the certificate and points the configuration at its new port.
    again = await start(options, api)
    try:
        assert again.credentials.ca_pem == ca_pem
        (entry,) = _configuration(api)["webhooks"]
        assert entry["clientConfig"]["url"] == f"https://127.0.0.1:{again.port}{WEBHOOK_PATH}"
    finally:
        await again.stop()
        api.close()


async def test_in_cluster_the_certificate_is_a_secret_and_the_ca_is_patched_in(cluster: KubeSim) -> None:
    api = cluster.api_client()
    core = CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "ome-system"}})
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "webhook.yaml").read_text()))
    (deployed,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    AdmissionregistrationV1Api(api).create_validating_webhook_configuration(deployed)
    try:
        running = await start(WebhookOptions(port=0, in_cluster=True), api)
        await running.stop()
        secret = core.read_namespaced_secret("ome-webhook-server-cert", "ome-system")
        assert secret.type == "kubernetes.io/tls" and set(secret.data) == {"ca.crt", "tls.crt", "tls.key"}
        assert base64.b64decode(secret.data["ca.crt"]) == running.credentials.ca_pem
        assert problems(running.credentials, ("ome-webhook-server-service.ome-system.svc",
                                              "ome-webhook-server-service.ome-system.svc.cluster.local")) == []
        (entry,) = _configuration(api)["webhooks"]
        assert entry["clientConfig"]["caBundle"] == secret.data["ca.crt"]
        assert entry["clientConfig"]["service"]["name"] == "ome-webhook-server-service"
        # Another replica (or a restart) reuses the Secret, and finds the CA already in place.
        assert ensure_in_secret(core, WebhookOptions(in_cluster=True).hosts()) == running.credentials
        patch_ca_bundle(AdmissionregistrationV1Api(api), running.credentials.ca_pem)
    finally:
        api.close()


def test_the_process_serves_until_sigterm(cluster: KubeSim, tmp_path: Path) -> None:
    environment = {**os.environ, "OME_KUBE__KUBECONFIG": cluster.kubeconfig_path, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.webhook", "--port", "0", "--cert-dir", str(tmp_path / "certs"),
         "--failure-policy", "Fail", "--url-host", "127.0.0.1"],
        cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    api = cluster.api_client()
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline and process.poll() is None:
            try:
                url = _configuration(api)["webhooks"][0]["clientConfig"]["url"]
            except kubernetes.client.exceptions.ApiException:
                time.sleep(0.2)
        assert url is not None, "the webhook never registered itself"
        status, answer = asyncio.run(_post(url, (tmp_path / "certs" / "ca.crt").read_bytes(),
                                           _review("CREATE", _too_many_replicas())))
        assert status == 200 and answer["response"]["allowed"] is False
        assert _configuration(api)["webhooks"][0]["failurePolicy"] == "Fail"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        output = process.stdout.read().decode() if process.stdout else ""
        api.close()
    assert "webhook serving" in output and "webhook stopped" in output, output


def test_the_namespaces_serving_runtime_comes_before_the_cluster_one(cluster: KubeSim) -> None:
    api = cluster.api_client()
    try:
        read = RuntimeReader(api)
        assert read("anywhere", "srt-qwen3-0-6b") == RUNTIME
        assert read("anywhere", "no-such-runtime") is None
        CoreV1Api(api).create_namespace({"metadata": {"name": "own-runtime"}})
        own = copy.deepcopy(RUNTIME_DOC)
        own.update(kind="ServingRuntime", metadata={"name": "srt-qwen3-0-6b", "namespace": "own-runtime"})
        own["spec"]["decoderConfig"] = copy.deepcopy(own["spec"]["engineConfig"])
        CustomObjectsApi(api).create_namespaced_custom_object("ome.io", "v1beta1", "own-runtime", "servingruntimes", own)
        found = read("own-runtime", "srt-qwen3-0-6b")
        assert found is not None and found.component_config("decoder") is not None
    finally:
        api.close()


async def test_a_runtime_that_cannot_be_read_is_a_server_error_so_the_failure_policy_decides() -> None:
    def unreadable(namespace: str, name: str) -> ServingRuntimeSpec | None:
        raise RuntimeUnavailable(f"reading ServingRuntime {name} failed: 503 Service Unavailable")

    async with TestClient(TestServer(application(unreadable))) as client:
        answer = await client.post(WEBHOOK_PATH, json=_review("CREATE", VALID))
        assert answer.status == 500
        assert await answer.text() == "reading ServingRuntime srt-qwen3-0-6b failed: 503 Service Unavailable"
        answer = await client.post(WEBHOOK_PATH, data=b"{not json")
        assert answer.status == 400 and (await answer.text()).startswith("the body is not JSON")


def test_an_unreachable_api_server_makes_the_runtime_unavailable() -> None:
    configuration = kubernetes.client.Configuration()
    configuration.host = "http://127.0.0.1:1"
    configuration.retries = 0
    with kubernetes.client.ApiClient(configuration) as api, pytest.raises(
        RuntimeUnavailable, match="reading ServingRuntime srt-qwen3-0-6b failed"
    ):
        RuntimeReader(api)("spread-demo", "srt-qwen3-0-6b")


# --- RBAC: what the webhook sends, against deploy/webhook.yaml's roles ---------------------------


@dataclass(frozen=True)
class Sent:
    group: str
    resource: str
    verb: str
    namespace: str | None
    name: str | None


def _logged(sim: KubeSim, sent: set[Sent]) -> Any:
    """An API client of `sim` that records every request it sends."""
    client = sim.api_client()
    call_api = client.call_api

    def record(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        group, resource, verb = request_of(method, url)
        segments = urlsplit(url).path.strip("/").split("/")
        namespace = segments[segments.index("namespaces") + 1] if "namespaces" in segments else None
        name = segments[-1] if verb in ("get", "update", "patch", "delete") else None
        sent.add(Sent(group, resource, verb, namespace, name))
        return call_api(method, url, *args, **kwargs)

    client.call_api = record
    return client


def _grants() -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace the rule holds in, or None for cluster-wide; rule) of the webhook's roles."""
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "webhook.yaml").read_text()))
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    grants = []
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["name"],
                                        "namespace": account["namespace"]}]
        role = next(d for d in docs if d["kind"] == binding["roleRef"]["kind"]
                    and d["metadata"]["name"] == binding["roleRef"]["name"])
        grants += [(role["metadata"].get("namespace"), rule) for rule in role["rules"]]
    return grants


def _allows(namespace: str | None, rule: dict[str, Any], sent: Sent) -> bool:
    return (
        (namespace is None or namespace == sent.namespace)
        and sent.group in rule["apiGroups"] and sent.resource in rule["resources"] and sent.verb in rule["verbs"]
        and ("resourceNames" not in rule or sent.name in rule["resourceNames"])
    )


async def test_deploy_grants_the_webhook_what_it_sends_and_nothing_more(cluster: KubeSim) -> None:
    admin = cluster.api_client()
    core = CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": "ome-system"}})
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "webhook.yaml").read_text()))
    deployed = next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration")
    AdmissionregistrationV1Api(admin).create_validating_webhook_configuration(deployed)
    sent: set[Sent] = set()
    api = _logged(cluster, sent)
    try:
        # First start creates the Secret; a stale one is replaced; the runtime is read both ways.
        await (await start(WebhookOptions(port=0, in_cluster=True), api)).stop()
        core.patch_namespaced_secret("ome-webhook-server-cert", "ome-system", {"data": {"tls.crt": ""}})
        running = await start(WebhookOptions(port=0, in_cluster=True), api)
        await running.stop()
        RuntimeReader(api)("spread-demo", "srt-qwen3-0-6b")
    finally:
        api.close()
        admin.close()
    grants = _grants()
    refused = sorted(str(s) for s in sent if not any(_allows(ns, rule, s) for ns, rule in grants))
    assert not refused, f"deploy/webhook.yaml does not allow {refused}"
    for namespace, rule in grants:
        for resource in rule["resources"]:
            for verb in rule["verbs"]:
                assert any(_allows(namespace, rule, s) for s in sent if (s.resource, s.verb) == (resource, verb)), (
                    f"deploy/webhook.yaml grants {verb} {resource}, which the webhook never sends"
                )
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field]
        if "secrets" in rule["resources"]:
            assert namespace == "ome-system" and ("resourceNames" in rule or rule["verbs"] == ["create"])
