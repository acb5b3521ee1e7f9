"""kubesim calls validating admission webhooks as kube-apiserver does, checked against a real HTTPS
webhook server started here (its CA and certificate made by `kubesim.tls`) through the official
Python client, raw HTTP and the real `kubectl`: rule matching, namespace and object selectors,
caBundle verification, timeoutSeconds, failurePolicy, the old object on UPDATE and DELETE, dryRun
and sideEffects, warnings, and the denial text as kubectl prints it.

Each test registers its own configuration under its own webhook path and namespace, and removes
it afterwards, so the tests do not see each other's webhooks.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kubesim.handle import KubeSim
from kubesim.timing import Timing
from kubesim.tls import make_credentials
from tests.kubesim.helpers import raw_request
from tests.kubesim.webhooks import SERVICE_HOST, Answer, WebhookServer, allow

KUBECTL = "/usr/bin/kubectl"
pytestmark = pytest.mark.kubesim
needs_kubectl = pytest.mark.skipif(not os.path.exists(KUBECTL),
                                   reason=f"{KUBECTL} is absent (it ships in the base image)")
@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(topology=None, timing=Timing.fast(), crds="product") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def hook_server() -> Iterator[WebhookServer]:
    server = WebhookServer().start()
    yield server
    server.stop()


class Setup:
    """One test's clients, namespace, webhook path and the configurations it registered."""

    def __init__(self, sim: KubeSim, server: WebhookServer, tmp: Path) -> None:
        self.sim, self.server, self.tmp = sim, server, tmp
        self.api = sim.api_client()
        self.core = kubernetes.client.CoreV1Api(self.api)
        self.admission = kubernetes.client.AdmissionregistrationV1Api(self.api)
        self.tag = uuid.uuid4().hex[:8]
        self.ns = f"wh-{self.tag}"
        self.path = f"/validate-{self.tag}"
        self.configs: list[str] = []
        self.core.create_namespace({"metadata": {"name": self.ns, "labels": {"team": "a"}}})

    def hook(self, name: str = "", path: str = "", rules: list[dict[str, Any]] | None = None,
             client: dict[str, Any] | None = None, only_here: bool = True, **fields: Any) -> dict[str, Any]:
        """A webhook (defaults: configmaps, CREATE/UPDATE/DELETE, this test's namespace only)."""
        hook: dict[str, Any] = {
            "name": name or f"{self.tag}.hooks.example.com",
            "clientConfig": client or {"url": self.server.url(path or self.path), "caBundle": self.server.ca_bundle},
            "rules": rules or [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
                                "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }
        if only_here:
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": self.ns}}
        hook.update(fields)
        return hook

    def register(self, *hooks: dict[str, Any]) -> str:
        name = f"cfg-{self.tag}-{len(self.configs)}"
        self.admission.create_validating_webhook_configuration(
            {"metadata": {"name": name}, "webhooks": list(hooks)})
        self.configs.append(name)
        return name

    def configmap(self, name: str = "cm", labels: dict[str, str] | None = None, **query: Any) -> Any:
        return self.core.create_namespaced_config_map(
            self.ns, {"metadata": {"name": name, "labels": labels or {}}, "data": {"k": "v"}}, **query)

    def configmap_names(self) -> list[str]:
        return [o["metadata"]["name"] for o in self.sim.objects("", "configmaps", self.ns)]

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": self.sim.kubeconfig_path, "HOME": str(self.tmp)}
        return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, check=False)

    def write(self, name: str, text: str) -> str:
        path = self.tmp / name
        path.write_text(text)
        return str(path)

    def close(self) -> None:
        for name in self.configs:
            self.admission.delete_validating_webhook_configuration(name)
        self.api.close()


@pytest.fixture
def s(sim: KubeSim, hook_server: WebhookServer, tmp_path: Path) -> Iterator[Setup]:
    setup = Setup(sim, hook_server, tmp_path)
    yield setup
    setup.close()


def api_error(call: Callable[[], Any]) -> tuple[int, dict[str, Any], Any]:
    with pytest.raises(kubernetes.client.ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body), info.value.headers


def deny(message: str = "", code: int = 403, reason: str = "Forbidden", **extra: Any) -> Answer:
    def answer(_: dict[str, Any]) -> dict[str, Any]:
        status: dict[str, Any] = {"code": code, "reason": reason, **extra}
        if message:
            status["message"] = message
        return {"allowed": False, "status": status}

    return answer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---- the configuration kind ---------------------------------------------------------------------


def test_configuration_is_served_with_the_api_server_defaults(s: Setup) -> None:
    name = s.register(s.hook(only_here=False))
    stored = s.admission.read_validating_webhook_configuration(name)
    hook = stored.webhooks[0]
    assert (hook.failure_policy, hook.match_policy, hook.timeout_seconds) == ("Fail", "Equivalent", 10)
    assert hook.namespace_selector.to_dict() == {"match_expressions": None, "match_labels": None}
    assert hook.object_selector.to_dict() == {"match_expressions": None, "match_labels": None}
    assert hook.rules[0].scope == "*"
    listed = s.admission.list_validating_webhook_configuration()
    assert name in [c.metadata.name for c in listed.items]
    resources = {r.name: r for r in s.admission.get_api_resources().resources}
    assert not resources["validatingwebhookconfigurations"].namespaced


def test_configuration_without_side_effects_or_review_versions_is_invalid(s: Setup) -> None:
    hook = s.hook()
    del hook["sideEffects"], hook["admissionReviewVersions"]
    body = {"metadata": {"name": f"bad-{s.tag}"}, "webhooks": [hook]}
    collection = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    code, status = raw_request(s.sim, "POST", collection, body)  # the typed client refuses to send it
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        f'ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad-{s.tag}" is invalid: '
        "[webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, "
        "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1]")
    assert [c["field"] for c in status["details"]["causes"]] == ["webhooks[0].sideEffects",
                                                                "webhooks[0].admissionReviewVersions"]
    body["webhooks"] = [s.hook(sideEffects="Some", timeoutSeconds=31)]
    _, status = raw_request(s.sim, "POST", collection, body)
    assert 'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"' \
        in status["message"]
    assert "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds" \
        in status["message"]


# ---- what a webhook is sent -----------------------------------------------------------------------


def test_create_update_and_delete_send_the_object_and_the_old_object(s: Setup) -> None:
    s.register(s.hook())
    s.configmap(labels={"v": "1"})
    s.core.patch_namespaced_config_map("cm", s.ns, {"data": {"k": "w"}})
    s.core.delete_namespaced_config_map("cm", s.ns)
    create, update, delete = s.server.requests(s.path)
    assert create["operation"] == "CREATE" and create["oldObject"] is None
    assert create["object"]["data"] == {"k": "v"}
    assert create["object"]["metadata"]["uid"]  # the would-be object: defaulted and filled in
    assert create["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert create["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert create["requestKind"] == create["kind"] and create["requestResource"] == create["resource"]
    assert (create["name"], create["namespace"], create["dryRun"]) == ("cm", s.ns, False)
    assert create["userInfo"]["username"] == "kubesim-admin"
    assert create["options"]["kind"] == "CreateOptions"
    assert update["operation"] == "UPDATE" and update["options"]["kind"] == "PatchOptions"
    assert update["oldObject"]["data"] == {"k": "v"} and update["object"]["data"] == {"k": "w"}
    assert delete["operation"] == "DELETE" and delete["object"] is None
    assert delete["oldObject"]["data"] == {"k": "w"} and delete["options"]["kind"] == "DeleteOptions"
    assert len({create["uid"], update["uid"], delete["uid"]}) == 3
    assert s.server.queries[s.path][0] == {"timeout": "10s"}


def test_rules_match_operations_groups_versions_and_resources(s: Setup) -> None:
    paths = {key: f"{s.path}-{key}" for key in ("create", "apps", "v2", "all", "star", "pods", "status")}
    rule = {"apiGroups": [""], "apiVersions": ["v1"]}
    s.register(
        s.hook(f"create.{s.tag}.example.com", paths["create"],
               [{**rule, "operations": ["CREATE"], "resources": ["configmaps"]}]),
        s.hook(f"apps.{s.tag}.example.com", paths["apps"],
               [{**rule, "apiGroups": ["apps"], "operations": ["*"], "resources": ["configmaps"]}]),
        s.hook(f"v2.{s.tag}.example.com", paths["v2"],
               [{**rule, "apiVersions": ["v2"], "operations": ["*"], "resources": ["configmaps"]}]),
        s.hook(f"all.{s.tag}.example.com", paths["all"],
               [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}]),
        s.hook(f"star.{s.tag}.example.com", paths["star"],
               [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["*"],
                 "scope": "Namespaced"}]),
        s.hook(f"pods.{s.tag}.example.com", paths["pods"], [{**rule, "operations": ["*"], "resources": ["pods"]}]),
        s.hook(f"status.{s.tag}.example.com", paths["status"],
               [{**rule, "operations": ["UPDATE"], "resources": ["pods/status"]}]),
    )
    s.configmap()
    s.core.patch_namespaced_config_map("cm", s.ns, {"data": {"k": "w"}})
    s.core.create_namespaced_pod(s.ns, {"metadata": {"name": "p"},
                                        "spec": {"containers": [{"name": "c", "image": "i:1"}]}})
    s.core.patch_namespaced_pod_status("p", s.ns, {"status": {"message": "hello"}})

    def seen(key: str) -> list[tuple[str, str, str]]:
        # A write whose object the controllers changed meanwhile (the scheduler marks the pod
        # unschedulable) is admitted again, so one request may be seen twice.
        return list(dict.fromkeys((r["operation"], r["resource"]["resource"], r.get("subResource", ""))
                                  for r in s.server.requests(paths[key])))

    assert seen("create") == [("CREATE", "configmaps", "")]
    assert seen("apps") == [] and seen("v2") == []
    assert seen("all") == [("CREATE", "configmaps", ""), ("UPDATE", "configmaps", ""), ("CREATE", "pods", ""),
                           ("UPDATE", "pods", "status")]
    # "*" names resources without their subresources.
    assert seen("star") == [("UPDATE", "configmaps", "")]
    # A status write is not sent to a webhook registered for the main resource.
    assert seen("pods") == [("CREATE", "pods", "")]
    assert seen("status") == [("UPDATE", "pods", "status")]
    assert s.server.requests(paths["status"])[0]["object"]["status"]["message"] == "hello"


def test_delete_collection_admits_each_deletion(s: Setup) -> None:
    s.configmap("a-gone")
    s.configmap("keep")
    s.register(s.hook())
    s.server.answers[s.path] = lambda r: ({"allowed": False, "status": {"code": 403, "message": "kept"}}
                                          if r["name"] == "keep" else {"allowed": True})
    code, status, _ = api_error(lambda: s.core.delete_collection_namespaced_config_map(s.ns))
    assert (code, status["message"]) == (403, f'admission webhook "{s.tag}.hooks.example.com" denied the request: '
                                              "kept")
    assert [(r["operation"], r["name"]) for r in s.server.requests(s.path)] == [("DELETE", "a-gone"),
                                                                               ("DELETE", "keep")]
    assert s.configmap_names() == ["keep"]


def test_subresources_with_kinds_of_their_own_send_those_kinds(s: Setup) -> None:
    scale_path, evict_path = f"{s.path}-scale", f"{s.path}-evict"
    s.register(
        s.hook(f"scale.{s.tag}.example.com", scale_path, [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                            "operations": ["UPDATE"], "resources": ["deployments/*"]}]),
        s.hook(f"evict.{s.tag}.example.com", evict_path, [{"apiGroups": [""], "apiVersions": ["v1"],
                                                            "operations": ["CREATE"], "resources": ["pods/eviction"]}]))
    apps = kubernetes.client.AppsV1Api(s.api)
    labels = {"app": "web"}
    apps.create_namespaced_deployment(s.ns, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}})
    apps.patch_namespaced_deployment_scale("web", s.ns, {"spec": {"replicas": 0}})
    scale = s.server.requests(scale_path)[-1]  # once more if the controller wrote status meanwhile
    assert (scale["operation"], scale["subResource"], scale["kind"]["kind"]) == ("UPDATE", "scale", "Scale")
    assert scale["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert scale["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert scale["object"]["spec"] == {"replicas": 0} and scale["oldObject"]["kind"] == "Scale"

    s.core.create_namespaced_pod(s.ns, {"metadata": {"name": "p"},
                                        "spec": {"containers": [{"name": "c", "image": "i:1"}]}})
    s.server.answers[evict_path] = deny("not now")
    eviction = {"metadata": {"name": "p", "namespace": s.ns}}
    code, status, _ = api_error(lambda: s.core.create_namespaced_pod_eviction("p", s.ns, eviction))
    assert (code, status["message"]) == (403, f'admission webhook "evict.{s.tag}.example.com" denied the request: '
                                               "not now")
    (evict,) = s.server.requests(evict_path)
    assert (evict["kind"]["kind"], evict["subResource"], evict["object"]["metadata"]["name"]) == (
        "Eviction", "eviction", "p")
    assert s.core.read_namespaced_pod("p", s.ns).metadata.deletion_timestamp is None


def test_namespace_and_object_selectors(s: Setup) -> None:
    other = f"wh-{s.tag}-b"
    s.core.create_namespace({"metadata": {"name": other, "labels": {"team": "b"}}})
    s.register(s.hook(only_here=False, namespaceSelector={"matchLabels": {"team": "a"}},
                      objectSelector={"matchExpressions": [{"key": "checked", "operator": "Exists"}]}))
    s.configmap("plain")
    s.configmap("labelled", labels={"checked": "yes"})
    s.core.create_namespaced_config_map(other, {"metadata": {"name": "labelled", "labels": {"checked": "yes"}}})
    # The old object's labels count too: removing the label is still checked.
    s.core.patch_namespaced_config_map("labelled", s.ns, {"metadata": {"labels": {"checked": None}}})
    seen = [(r["namespace"], r["name"], r["operation"]) for r in s.server.requests(s.path)]
    assert seen == [(s.ns, "labelled", "CREATE"), (s.ns, "labelled", "UPDATE")]


# ---- verdicts ---------------------------------------------------------------------------------


def test_denial_is_the_webhooks_status_with_the_api_servers_text(s: Setup) -> None:
    s.register(s.hook())
    s.server.answers[s.path] = deny("spec.model: must be set (ModelRequired)")
    code, status, _ = api_error(lambda: s.configmap())
    assert (code, status["reason"], status["status"]) == (403, "Forbidden", "Failure")
    assert status["message"] == (f'admission webhook "{s.tag}.hooks.example.com" denied the request: '
                                 "spec.model: must be set (ModelRequired)")
    s.server.answers[s.path] = deny(code=200, reason="")
    code, status, _ = api_error(lambda: s.configmap())
    assert (code, "reason" in status) == (400, False)
    assert status["message"] == f'admission webhook "{s.tag}.hooks.example.com" denied the request without explanation'
    s.server.answers[s.path] = deny(code=422, reason="Invalid")
    code, status, _ = api_error(lambda: s.configmap())
    assert (code, status["message"]) == (422, f'admission webhook "{s.tag}.hooks.example.com" denied the request: '
                                              "Invalid")
    assert s.configmap_names() == []


def test_warnings_come_back_as_warning_headers_even_with_a_denial(s: Setup) -> None:
    s.register(s.hook())
    s.server.answers[s.path] = lambda _: {"allowed": True, "warnings": ['tolerance "60" is high', "second"]}
    conn = http.client.HTTPConnection("127.0.0.1", s.sim.port, timeout=30)
    conn.request("POST", f"/api/v1/namespaces/{s.ns}/configmaps", body=json.dumps({"metadata": {"name": "cm"}}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 201
    assert resp.headers.get_all("Warning") == ['299 - "tolerance \\"60\\" is high"', '299 - "second"']
    s.server.answers[s.path] = lambda _: {"allowed": False, "warnings": ["careful"], "status": {"code": 403}}
    _, _, headers = api_error(lambda: s.configmap("cm2"))
    assert headers["Warning"] == '299 - "careful"'


def test_a_call_that_fails_is_decided_by_the_failure_policy(s: Setup) -> None:
    port = free_port()
    url = f"https://127.0.0.1:{port}/down"
    s.register(s.hook(client={"url": url, "caBundle": s.server.ca_bundle}))
    code, status, _ = api_error(lambda: s.configmap())
    assert (code, status["reason"]) == (500, "InternalError")
    assert status["message"] == (f'Internal error occurred: failed calling webhook "{s.tag}.hooks.example.com": '
                                 f'failed to call webhook: Post "{url}?timeout=10s": dial tcp 127.0.0.1:{port}: '
                                 "connect: connection refused")
    s.admission.patch_validating_webhook_configuration(s.configs[0], [
        {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}])
    s.configmap()
    assert s.configmap_names() == ["cm"]


def test_tls_is_verified_against_the_ca_bundle(s: Setup) -> None:
    stranger = base64.b64encode(make_credentials().ca_pem).decode()
    s.register(s.hook(client={"url": s.server.url(s.path), "caBundle": stranger}))
    code, status, _ = api_error(lambda: s.configmap())
    assert code == 500
    assert status["message"].endswith(f'Post "{s.server.url(s.path)}?timeout=10s": tls: failed to verify '
                                      "certificate: x509: certificate signed by unknown authority")
    s.register(s.hook(f"ignored.{s.tag}.example.com", client={"url": s.server.url(s.path), "caBundle": stranger},
                      failurePolicy="Ignore"))
    s.admission.delete_validating_webhook_configuration(s.configs.pop(0))
    s.configmap()
    assert s.configmap_names() == ["cm"] and s.server.requests(s.path) == []


def test_a_slow_webhook_times_out_without_blocking_the_api_server(s: Setup) -> None:
    s.register(s.hook(timeoutSeconds=1))
    s.server.delays[s.path] = 1.6
    result: dict[str, Any] = {}

    def create() -> None:
        result["error"] = api_error(lambda: s.configmap())

    writer = threading.Thread(target=create)
    started = time.monotonic()
    writer.start()
    time.sleep(0.2)
    reads = time.monotonic()
    assert s.core.read_namespace(s.ns).metadata.name == s.ns  # served while the webhook is waited for
    assert time.monotonic() - reads < 0.5
    writer.join(10)
    assert 0.9 < time.monotonic() - started < 1.5
    code, status, _ = result["error"]
    assert code == 500
    assert status["message"].endswith(f'Post "{s.server.url(s.path)}?timeout=1s": context deadline exceeded')
    assert s.server.queries[s.path][0] == {"timeout": "1s"}
    assert s.configmap_names() == []


def test_an_answer_for_another_request_is_a_failed_call(s: Setup) -> None:
    s.register(s.hook())
    s.server.answers[s.path] = lambda r: {"raw": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                                  "response": {"uid": "other", "allowed": True}}}
    _, status, _ = api_error(lambda: s.configmap())
    uid = s.server.requests(s.path)[0]["uid"]
    assert status["message"].endswith(f'received invalid webhook response: expected response.uid="{uid}", '
                                      'got "other"')


def test_a_service_reference_resolves_only_through_the_configured_hosts(
        s: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    service = {"name": "whsvc", "namespace": "whns", "path": s.path}
    s.register(s.hook(client={"service": service, "caBundle": s.server.ca_bundle}))
    _, status, _ = api_error(lambda: s.configmap())
    assert status["message"].endswith(f'failed to call webhook: Post "https://{SERVICE_HOST}:443{s.path}'
                                      f'?timeout=10s": dial tcp: lookup {SERVICE_HOST}: no such host')
    monkeypatch.setenv("KUBESIM_WEBHOOK_SERVICE_HOSTS", f"{SERVICE_HOST}:443=127.0.0.1:{s.server.port}")
    s.server.answers[s.path] = deny("through the service")
    _, status, _ = api_error(lambda: s.configmap())
    assert status["message"].endswith("denied the request: through the service")


# ---- dry run ----------------------------------------------------------------------------------


def test_dry_run_calls_side_effect_free_webhooks_and_commits_nothing(s: Setup) -> None:
    s.register(s.hook())
    s.configmap(dry_run="All")
    assert s.configmap_names() == []
    request = s.server.requests(s.path)[0]
    assert request["dryRun"] is True and request["options"]["dryRun"] == ["All"]
    # A configuration with side effects (legal before admissionregistration v1) refuses dry runs.
    legacy = s.hook(f"legacy.{s.tag}.example.com", sideEffects="Some")
    s.sim.call(lambda: s.sim.cluster.store.put(
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": f"legacy-{s.tag}", "uid": s.tag}, "webhooks": [legacy]}))
    s.configs.append(f"legacy-{s.tag}")
    code, status, _ = api_error(lambda: s.configmap(dry_run="All"))
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == f'admission webhook "legacy.{s.tag}.example.com" does not support dry run'
    s.configmap()
    assert s.configmap_names() == ["cm"]


# ---- kubectl ----------------------------------------------------------------------------------


@needs_kubectl
def test_kubectl_applies_a_configuration_and_prints_denials_and_warnings(s: Setup) -> None:
    hook = s.hook(f"kubectl.{s.tag}.example.com")
    config = s.write("config.yaml", json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"kubectl-{s.tag}"}, "webhooks": [hook]}))
    done = s.kubectl("apply", "-f", config)
    assert done.stdout == f"validatingwebhookconfiguration.admissionregistration.k8s.io/kubectl-{s.tag} created\n"
    s.configs.append(f"kubectl-{s.tag}")
    rows = s.kubectl("get", "validatingwebhookconfigurations", f"kubectl-{s.tag}").stdout.split()
    assert rows[:4] == ["NAME", "WEBHOOKS", "AGE", f"kubectl-{s.tag}"] and rows[4] == "1"

    cm = s.write("cm.yaml", f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: {s.ns}\n"
                            "data:\n  k: v\n")
    s.server.answers[s.path] = deny("value k is not allowed (ValueRefused)")
    done = s.kubectl("apply", "-f", cm)
    assert done.returncode == 1
    assert done.stderr == (f'Error from server (Forbidden): error when creating "{cm}": admission webhook '
                           f'"kubectl.{s.tag}.example.com" denied the request: value k is not allowed (ValueRefused)\n')
    done = s.kubectl("apply", "--server-side", "-f", cm)
    assert done.returncode == 1
    assert done.stderr == (f'Error from server (Forbidden): admission webhook "kubectl.{s.tag}.example.com" denied '
                           "the request: value k is not allowed (ValueRefused)\n")

    s.server.answers[s.path] = allow
    done = s.kubectl("apply", "--dry-run=server", "-f", cm)
    assert (done.returncode, done.stdout) == (0, "configmap/cm created (server dry run)\n")
    assert s.server.requests(s.path)[-1]["dryRun"] is True and s.configmap_names() == []

    s.server.answers[s.path] = lambda _: {"allowed": True,
                                          "warnings": ["ratio tolerance above 50 (RatioToleranceTooHigh)"]}
    done = s.kubectl("apply", "-f", cm)
    assert (done.returncode, done.stdout) == (0, "configmap/cm created\n")
    assert done.stderr == "Warning: ratio tolerance above 50 (RatioToleranceTooHigh)\n"

    s.server.answers[s.path] = deny("kept (Kept)")
    done = s.kubectl("delete", "configmap", "cm", "-n", s.ns)
    assert done.returncode == 1
    assert done.stderr == (f'Error from server (Forbidden): admission webhook "kubectl.{s.tag}.example.com" '
                           "denied the request: kept (Kept)\n")
    assert s.configmap_names() == ["cm"]
    assert [r["operation"] for r in s.server.requests(s.path)] == ["CREATE", "CREATE", "CREATE", "CREATE", "DELETE"]


@needs_kubectl
def test_kubectl_apply_of_a_custom_resource_prints_the_product_webhooks_denial(s: Setup) -> None:
    webhook = "inferenceservice.ome-webhook-server.validator"
    s.register(s.hook(webhook, rules=[{"apiGroups": ["ome.io"], "apiVersions": ["v1beta1"],
                                       "operations": ["CREATE", "UPDATE"], "resources": ["inferenceservices"]}]))
    message = "spec.rollout.groups[0]: canary group names the engine but not the decoder (CanaryUnitSplit)"
    s.server.answers[s.path] = deny(message)
    isvc = s.write("isvc.yaml", f"""apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: qwen
  namespace: {s.ns}
spec:
  model:
    name: qwen3-0-6b
  engine:
    minReplicas: 1
    maxReplicas: 1
""")
    done = s.kubectl("apply", "-f", isvc)
    assert done.returncode == 1
    assert done.stderr == (f'Error from server (Forbidden): error when creating "{isvc}": admission webhook '
                           f'"{webhook}" denied the request: {message}\n')
    assert s.sim.objects("ome.io", "inferenceservices", s.ns) == []
    s.server.answers[s.path] = allow
    assert s.kubectl("apply", "-f", isvc).stdout == "inferenceservice.ome.io/qwen created\n"
    custom = kubernetes.client.CustomObjectsApi(s.api)
    custom.patch_namespaced_custom_object_status("ome.io", "v1beta1", s.ns, "inferenceservices", "qwen",
                                                 {"status": {"observedGeneration": 1}})
    # The denied create and the allowed one; the status write is not the webhook's.
    assert [(r["kind"]["kind"], r["operation"], r["name"], r.get("subResource")) for r in s.server.requests(s.path)] \
        == [("InferenceService", "CREATE", "qwen", None)] * 2
