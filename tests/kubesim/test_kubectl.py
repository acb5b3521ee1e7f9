"""The real `kubectl` (client 1.32, from the machine's base image) against kubesim: the commands
the README walkthrough uses, each checked by its exact output.

Covers what kubectl does differently from the Python client: protobuf request bodies for
built-in kinds (`create namespace|configmap|deployment|secret`), OpenAPI v3 for `apply`
(client-side strategic merge patch and `--server-side`), server-side Tables for `get` (wide
columns, CRD printer columns, events, and Tables inside `get -w` watch events).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kubesim.handle import KubeSim
from kubesim.timing import Timing

KUBECTL = "/usr/bin/kubectl"
pytestmark = pytest.mark.kubesim
needs_kubectl = pytest.mark.skipif(not os.path.exists(KUBECTL),
                                   reason=f"{KUBECTL} is absent (it ships in the base image)")
ISVC = "qwen3-0-6b"


class Kubectl:
    """Runs the kubectl binary against one kubesim, with its own HOME (so its discovery cache)."""

    def __init__(self, sim: KubeSim, home: Path) -> None:
        self.sim = sim
        self.env = {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home)}
        self.dir = home

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([KUBECTL, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def lines(self, *args: str) -> list[list[str]]:
        """Table output split into cells (columns are separated by two or more spaces)."""
        return [re.split(r"\s{2,}", line.strip()) for line in self.out(*args).splitlines() if line.strip()]

    def write(self, name: str, text: str) -> str:
        path = self.dir / name
        path.write_text(text)
        return str(path)


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    sim = KubeSim(topology="zones=2,nodes-per-zone=2,gpus=8", crds="product", timing=Timing.fast()).start()
    try:
        yield Kubectl(sim, tmp_path_factory.mktemp("kubectl-home"))
    finally:
        sim.stop()


@pytest.fixture
def ns(kubectl: Kubectl) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    assert kubectl.out("create", "namespace", name) == f"namespace/{name} created\n"
    return name


def _pod_yaml(name: str, namespace: str, isvc: str = ISVC) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  labels:
    ome.io/inferenceservice: {isvc}
spec:
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector:
      matchLabels:
        ome.io/inferenceservice: {isvc}
  containers:
  - name: engine
    image: kubesim/engine:1
"""


def _isvc_yaml(namespace: str, max_replicas: int = 2) -> str:
    return f"""apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: {ISVC}
  namespace: {namespace}
spec:
  deploymentMode: OMENative
  model:
    name: qwen3-0-6b
  runtime:
    name: srt-qwen3-0-6b
  engine:
    minReplicas: 2
    maxReplicas: {max_replicas}
    topologySpread: Required
    topologySpreadKey: topology.kubernetes.io/zone
"""


def _stored(kubectl: Kubectl, group: str, plural: str, namespace: str, name: str) -> dict[str, Any]:
    found = [o for o in kubectl.sim.objects(group, plural, namespace) if o["metadata"]["name"] == name]
    assert found, f"{plural}.{group} {namespace}/{name} is not stored"
    return found[0]


@needs_kubectl
def test_create_commands_send_protobuf_that_kubesim_decodes(kubectl: Kubectl, ns: str) -> None:
    stored_ns = _stored(kubectl, "", "namespaces", "", ns)
    assert stored_ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": ns}
    assert "creationTimestamp" in stored_ns["metadata"]
    assert kubectl.out("create", "configmap", "cfg", "-n", ns, "--from-literal=a=1",
                       "--from-literal=empty=") == "configmap/cfg created\n"
    assert _stored(kubectl, "", "configmaps", ns, "cfg")["data"] == {"a": "1", "empty": ""}
    assert kubectl.out("create", "secret", "generic", "sec", "-n", ns, "--from-literal=p=q") == "secret/sec created\n"
    assert _stored(kubectl, "", "secrets", ns, "sec")["data"] == {"p": base64.b64encode(b"q").decode()}
    # replicas is a pointer: protobuf carries an explicit 0, which must not become the default 1.
    assert kubectl.out("create", "deployment", "web", "-n", ns, "--image=nginx:1",
                       "--replicas=0", "--port=8080") == "deployment.apps/web created\n"
    spec = _stored(kubectl, "apps", "deployments", ns, "web")["spec"]
    assert spec["replicas"] == 0
    assert spec["selector"] == {"matchLabels": {"app": "web"}}
    container = spec["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"], container["ports"][0]["containerPort"]) == ("nginx", "nginx:1",
                                                                                              8080)
    assert kubectl.out("create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080") == "service/web created\n"
    port = _stored(kubectl, "", "services", ns, "web")["spec"]["ports"][0]
    assert (port["port"], port["targetPort"], port["protocol"]) == (80, 8080, "TCP")


@needs_kubectl
def test_get_nodes_and_zone_custom_columns(kubectl: Kubectl) -> None:
    rows = kubectl.lines("get", "nodes")
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [r[0] for r in rows[1:]] == ["gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"]
    assert {r[1] for r in rows[1:]} == {"Ready"}
    out = kubectl.out("get", "nodes", "gpu-node-1", "gpu-node-2",
                      "-o", r"custom-columns=NAME:.metadata.name,ZONE:.metadata.labels.topology\.kubernetes\.io/zone")
    assert [line.split() for line in out.splitlines()] == [["NAME", "ZONE"], ["gpu-node-1", "zone-a"],
                                                            ["gpu-node-2", "zone-b"]]


@needs_kubectl
def test_apply_wait_get_describe_events_and_delete(kubectl: Kubectl, ns: str) -> None:
    cm = kubectl.write(f"{ns}-cm.yaml", f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
                                        f"  namespace: {ns}\ndata:\n  mode: a\n")
    assert kubectl.out("apply", "-f", cm) == "configmap/settings created\n"
    Path(cm).write_text(Path(cm).read_text().replace("mode: a", "mode: b"))
    assert kubectl.out("apply", "-f", cm) == "configmap/settings configured\n"
    assert _stored(kubectl, "", "configmaps", ns, "settings")["data"] == {"mode": "b"}
    isvc = kubectl.write(f"{ns}-isvc.yaml", _isvc_yaml(ns))
    assert kubectl.out("apply", "-f", isvc) == f"inferenceservice.ome.io/{ISVC} created\n"
    assert kubectl.out("apply", "-f", isvc) == f"inferenceservice.ome.io/{ISVC} unchanged\n"
    assert kubectl.out("apply", "--server-side", "-f", isvc) == f"inferenceservice.ome.io/{ISVC} serverside-applied\n"
    Path(isvc).write_text(_isvc_yaml(ns, max_replicas=3))
    # maxReplicas is still co-owned by the client-side apply: changing it conflicts, as on a real cluster.
    conflict = kubectl.run("apply", "--server-side", "-f", isvc, check=False)
    assert conflict.returncode == 1
    assert ('Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using ome.io/v1beta1: '
            ".spec.engine.maxReplicas") in conflict.stderr
    assert kubectl.out("apply", "--server-side", "--force-conflicts", "-f", isvc) == \
        f"inferenceservice.ome.io/{ISVC} serverside-applied\n"
    assert kubectl.out("get", "inferenceservice", ISVC, "-n", ns, "-o",
                       "jsonpath={.spec.engine.topologySpreadKey} {.spec.engine.maxReplicas}") == \
        "topology.kubernetes.io/zone 3"

    pod = kubectl.write(f"{ns}-pod.yaml", _pod_yaml("engine-0", ns))
    assert kubectl.out("apply", "-f", pod) == "pod/engine-0 created\n"
    assert kubectl.out("wait", "--for=condition=Ready", "pod/engine-0", "-n", ns,
                       "--timeout=30s") == "pod/engine-0 condition met\n"
    node = _stored(kubectl, "", "pods", ns, "engine-0")["spec"]["nodeName"]
    out = kubectl.out("get", "pods", "-n", ns, "-l", f"ome.io/inferenceservice={ISVC}", "-o",
                      "custom-columns=NAME:.metadata.name,SPREAD-KEY:.spec.topologySpreadConstraints[*].topologyKey,"
                      "WHEN:.spec.topologySpreadConstraints[*].whenUnsatisfiable,NODE:.spec.nodeName")
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "SPREAD-KEY", "WHEN", "NODE"], ["engine-0", "topology.kubernetes.io/zone", "DoNotSchedule", node]]

    wide = kubectl.lines("get", "pods", "-A", "-o", "wide")
    assert wide[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                       "READINESS GATES"]
    row = next(r for r in wide if r[:2] == [ns, "engine-0"])
    assert row[2:4] == ["1/1", "Running"] and row[7] == node and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", row[6])

    described = kubectl.out("describe", "pod", "engine-0", "-n", ns)
    assert re.search(r"^Name:\s+engine-0$", described, re.M)
    assert re.search(rf"^Node:\s+{node}/", described, re.M)
    assert re.search(r"^Status:\s+Running$", described, re.M)
    assert re.search(rf"Normal\s+Scheduled\s+\S+\s+default-scheduler\s+Successfully assigned {ns}/engine-0 to {node}",
                     described)

    events = kubectl.lines("get", "events", "-n", ns)
    assert events[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert ["Normal", "Scheduled", "pod/engine-0", f"Successfully assigned {ns}/engine-0 to {node}"] in \
        [r[1:] for r in events[1:]]

    deleted = kubectl.out("delete", "inferenceservice", ISVC, "-n", ns)
    assert re.fullmatch(rf'inferenceservice.ome.io "{ISVC}" deleted( from {ns} namespace)?\n', deleted)
    assert kubectl.out("delete", "configmap", "settings", "-n", ns).startswith('configmap "settings" deleted')
    assert not [o for o in kubectl.sim.objects("ome.io", "inferenceservices", ns)]


@needs_kubectl
def test_get_irep_prints_the_crd_printer_columns(kubectl: Kubectl, ns: str) -> None:
    irep = kubectl.write(f"{ns}-irep.yaml", f"""apiVersion: ome.io/v1beta1
kind: InferenceReplica
metadata:
  name: {ISVC}-engine
  namespace: {ns}
spec:
  component: engine
  replicas: 2
  topologySpread: Required
  topologySpreadKey: topology.kubernetes.io/zone
""")
    assert kubectl.out("apply", "-f", irep) == f"inferencereplica.ome.io/{ISVC}-engine created\n"
    rows = kubectl.lines("get", "irep", "-n", ns)
    assert rows[0] == ["NAME", "COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE", "AGE"]
    assert rows[1][:6] == [f"{ISVC}-engine", "engine", "2", "<none>", "<none>", "<none>"]
    out = kubectl.out("get", "inferencereplica", f"{ISVC}-engine", "-n", ns, "-o",
                      "custom-columns=NAME:.metadata.name,SPREAD:.spec.topologySpread,"
                      "SPREAD-KEY:.spec.topologySpreadKey,TOPOLOGY-KEY:.spec.topologyKey")
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "SPREAD", "SPREAD-KEY", "TOPOLOGY-KEY"],
        [f"{ISVC}-engine", "Required", "topology.kubernetes.io/zone", "<none>"]]


@needs_kubectl
def test_get_pods_watch_streams_updates(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", kubectl.write(f"{ns}-a.yaml", _pod_yaml("first", ns)))
    proc = subprocess.Popen([KUBECTL, "get", "pods", "-n", ns, "-w"], env=kubectl.env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        header = proc.stdout.readline().split()
        assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert proc.stdout.readline().split()[0] == "first"
        kubectl.run("apply", "-f", kubectl.write(f"{ns}-b.yaml", _pod_yaml("second", ns)))
        deadline = time.monotonic() + 30
        seen: list[list[str]] = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline().split()
            if line[:1] == ["first"]:
                continue  # first's own updates (it may still be starting)
            seen.append(line)
            if line[:3] == ["second", "1/1", "Running"]:
                break
        # Each update is a row of the server's Table (READY, STATUS), not kubectl's NAME/AGE fallback.
        assert seen[0][:3] == ["second", "0/1", "Pending"]
        assert seen[-1][:3] == ["second", "1/1", "Running"], seen
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@needs_kubectl
def test_delete_namespace(kubectl: Kubectl) -> None:
    name = f"k-{uuid.uuid4().hex[:8]}"
    kubectl.run("create", "namespace", name)
    assert kubectl.out("delete", "namespace", name) == f'namespace "{name}" deleted\n'



@needs_kubectl
def test_unknown_fields_are_rejected_under_strict_validation(kubectl: Kubectl, ns: str) -> None:
    # kubectl finds fieldValidation in the OpenAPI v3 paths, so it leaves validation to the server.
    bad = kubectl.write(f"{ns}-bad.yaml", f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n"
                                          f"  namespace: {ns}\ndata:\n  a: b\ndatta:\n  c: d\n")
    done = kubectl.run("apply", "-f", bad, check=False)
    assert done.returncode == 1
    assert 'strict decoding error: unknown field "datta"' in done.stderr
    assert not [o for o in kubectl.sim.objects("", "configmaps", ns) if o["metadata"]["name"] == "bad"]
    warned = kubectl.run("apply", "--validate=warn", "-f", bad)
    assert warned.stdout == "configmap/bad created\n"
    assert 'Warning: unknown field "datta"' in warned.stderr


# ---- wire level: what kubectl relies on, checked without the binary --------------------------


def _request(sim: KubeSim, method: str, path: str, body: bytes = b"",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=30)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_protobuf_envelope_decodes_and_custom_resources_answer_415(kubesim: KubeSim) -> None:
    meta = _field(1, _field(1, b"pb-demo") + _field(2, b""))  # ObjectMeta{name, generateName:""}
    raw = meta + _field(2, _field(1, b"kubernetes"))  # NamespaceSpec{finalizers}
    envelope = b"k8s\x00" + _field(1, _field(1, b"v1") + _field(2, b"Namespace")) + _field(2, raw)
    code, _, data = _request(kubesim, "POST", "/api/v1/namespaces", envelope,
                             {"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert code == 201, data
    created = json.loads(data)
    assert created["metadata"]["name"] == "pb-demo" and "generateName" not in created["metadata"]
    code, _, data = _request(kubesim, "POST", "/apis/ome.io/v1beta1/namespaces/default/inferenceservices",
                             envelope, {"Content-Type": "application/vnd.kubernetes.protobuf"})
    status = json.loads(data)
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    assert "application/json" in status["message"]


def test_openapi_v3_index_and_documents(kubesim: KubeSim) -> None:
    code, _, data = _request(kubesim, "GET", "/openapi/v3")
    assert code == 200
    paths = json.loads(data)["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/ome.io/v1beta1"} <= paths.keys()
    code, headers, data = _request(kubesim, "GET", paths["apis/ome.io/v1beta1"]["serverRelativeURL"])
    assert code == 200 and headers["Cache-Control"] == "public, immutable"
    doc = json.loads(data)
    isvc = doc["components"]["schemas"]["io.ome.v1beta1.InferenceService"]
    assert isvc["x-kubernetes-group-version-kind"] == [{"group": "ome.io", "version": "v1beta1",
                                                        "kind": "InferenceService"}]
    patch = doc["paths"]["/apis/ome.io/v1beta1/namespaces/{namespace}/inferenceservices/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    # Custom resources take no strategic merge patch; built-in kinds do, with the schema's patch keys.
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    code, _, data = _request(kubesim, "GET", "/openapi/v3/api/v1")
    containers = json.loads(data)["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name" and containers["type"] == "array"
    # v2 exists as JSON; asked for as gnostic protobuf only, it is 406, as from a server that cannot.
    code, _, data = _request(kubesim, "GET", "/openapi/v2",
                             headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert code == 406 and json.loads(data)["reason"] == "NotAcceptable"
    code, _, data = _request(kubesim, "GET", "/openapi/v2", headers={"Accept": "application/json"})
    assert code == 200 and "io.k8s.api.core.v1.Pod" in json.loads(data)["definitions"]
    code, _, data = _request(kubesim, "GET", "/version")
    assert json.loads(data)["minor"] == json.loads(data)["gitVersion"].split(".")[1]


def test_stop_ends_a_watch_whose_client_stopped_reading() -> None:
    sim = KubeSim(topology="zones=1,nodes-per-zone=1,gpus=8", timing=Timing.fast()).start()
    stuck = socket.create_connection(("127.0.0.1", sim.port))
    try:
        stuck.sendall(b"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: kubesim\r\n\r\n")
        core = kubernetes.client.CoreV1Api(sim.api_client())
        for i in range(40):  # enough to fill the socket buffers, so the server blocks writing
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}, "data": {"a": "x" * 100_000}})
        started = time.monotonic()
        sim.stop()
        # Without close_watches the HTTP shutdown waits 1 s for the blocked handler, then 1 s more
        # to cancel it (2 s in all); close_watches cancels it after 0.2 s.
        assert time.monotonic() - started < 1.5
    finally:
        stuck.close()
        sim.stop()


@needs_kubectl
def test_get_services_prints_type_ips_and_ports(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "service", "nodeport", "np", "-n", ns, "--tcp=81:9090")
    rows = kubectl.lines("get", "svc", "-n", ns, "-o", "wide")
    assert rows[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    node_port = _stored(kubectl, "", "services", ns, "np")["spec"]["ports"][0]["nodePort"]
    assert rows[1][:2] == ["np", "NodePort"] and rows[1][3:5] == ["<none>", f"81:{node_port}/TCP"]
    assert rows[1][6] == "app=np"


@needs_kubectl
def test_drain_evicts_with_protobuf_evictions_then_uncordon(kubectl: Kubectl, ns: str) -> None:
    pod = _pod_yaml("drainme", ns, isvc="drain").replace(
        "spec:\n", "spec:\n  nodeSelector:\n    kubernetes.io/hostname: gpu-node-4\n", 1)
    kubectl.run("apply", "-f", kubectl.write(f"{ns}-drain.yaml", pod))
    kubectl.run("wait", "--for=condition=Ready", "pod/drainme", "-n", ns, "--timeout=30s")
    try:
        out = kubectl.out("drain", "gpu-node-4", "--force", "--ignore-daemonsets", "--timeout=30s")
        assert "node/gpu-node-4 cordoned" in out and "pod/drainme evicted" in out
        assert out.rstrip().endswith("node/gpu-node-4 drained")
        assert not [p for p in kubectl.sim.objects("", "pods", ns) if p["metadata"]["name"] == "drainme"]
    finally:
        assert kubectl.out("uncordon", "gpu-node-4") == "node/gpu-node-4 uncordoned\n"


@needs_kubectl
def test_kubectl_raw_reaches_the_control_api_and_its_answer_ends_its_line(kubectl: Kubectl) -> None:
    """The README's way to mark an image bad: `kubectl create --raw` POSTs the file to /sim/."""
    settings = kubectl.write("bad-image.json", '{"image": "vllm:raw-bad", "error_ratio": 0.3}\n')
    out = kubectl.out("create", "--raw", "/sim/traffic/images", "-f", settings)
    assert out.endswith("}\n"), repr(out)
    assert {"image": "vllm:raw-bad", "error_ratio": 0.3, "ttft_seconds": 0.2} in json.loads(out)["images"]
    shown = kubectl.out("get", "--raw", "/sim/traffic")
    assert shown.endswith("}\n") and json.loads(shown)["images"] == json.loads(out)["images"]
