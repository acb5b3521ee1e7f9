"""What the lifecycle bench and the worker-kill chaos test share.

- the InferenceService they drive: N single-pod engine Instances, SurgeThenDrain with
  maxSurge 25%, `RecreateInstanceOnPodRestart`, and a runtime that asks for no GPU so that
  kubesim's node count, not its GPU count, bounds the Instances;
- `apply`: update-with-start of the `InferenceService` workflow, as users apply a spec;
- `ProductProcess`: the product's worker (`python -m workers`) or watcher
  (`python -m workers.watcher`) as a real process, so a SIGKILL is a real crash and its RSS
  is its own;
- `worker_processes`: K such workers on one task queue (issue 17: two worker processes);
- `observe_pods`: a snapshot of the Instances' pods read inside kubesim's event loop, which
  neither goes through the API (so it does not count in kubesim's request counters) nor
  copies every object.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

from kubesim.handle import KubeSim
from kubesim.timing import Timing
from workers.config import ENV_PREFIX
from workflows.names import INFERENCE_SERVICE, isvc_workflow_id
from workflows.service.messages import UPDATE_APPLY, ApplyResult

REPO_ROOT = Path(__file__).resolve().parents[1]
RUNTIME_NAME = "srt-bench"
IMAGE_1 = "docker.io/lmsysorg/sglang:v0.4.6"
IMAGE_2 = "docker.io/lmsysorg/sglang:v0.4.7"
LABEL_ISVC = "ome.io/inferenceservice"
LABEL_INDEX = "ome.io/instance-index"
LABEL_COMPONENT = "ome.io/component"
SERVING_GATE = "ome.io/serving"
LABEL_PAIRING = "ome.io/pairing-protocol"
LABEL_REVISION = "ome.io/revision"

BENCH_CLUSTER: dict[str, Any] = {"drain_seconds": 0.0}
"""Cluster lifecycle settings for the runs: no drain pause, so the figures measure the
workflows, not a wait we chose (SurgeThenDrain still takes the old pod out of rotation only
after the new one serves)."""

PODS_PER_NODE = 110
"""kubesim's default maxPods per node."""


def topology_for(pods: int) -> str:
    """A kubesim topology with room for `pods` pods (and a margin), in three zones."""
    nodes_per_zone = max(2, -(-int(pods * 1.2) // (3 * PODS_PER_NODE)))
    return f"zones=3,nodes-per-zone={nodes_per_zone},gpus=8"


def instant_kubesim(topology: str) -> KubeSim:
    """A started kubesim whose images pull, start and become ready at once: the figures and
    the chaos tests measure the workflows, not the images. The caller stops it."""
    sim = KubeSim(topology=topology, crds="product", timing=Timing.fast()).start()
    sim.set_default_timing(pull_seconds=0.0, start_seconds=0.0, ready_seconds=0.0, factor=0.001)
    return sim


def runtime_manifest(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "ServingRuntime",
        "metadata": {"name": RUNTIME_NAME, "namespace": namespace},
        "spec": {
            "supportedModelFormats": [{"name": "safetensors", "autoSelect": True}],
            "engineConfig": {"runner": {"name": "ome-container", "image": IMAGE_1}},
        },
    }


def isvc_manifest(namespace: str, name: str, instances: int, image: str) -> dict[str, Any]:
    """N single-pod engine Instances running `image`, updated by SurgeThenDrain (maxSurge 25%)."""
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "bench-model"},
            "runtime": {"name": RUNTIME_NAME},
            "engine": {
                "minReplicas": instances,
                "maxReplicas": instances,
                "runner": {"image": image},
                "lifecycle": {
                    "restartPolicy": "RecreateInstanceOnPodRestart",
                    "updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": "25%"}},
                },
            },
        },
    }


def prepare_namespace(sim: KubeSim, namespace: str) -> None:
    """The namespace and the ServingRuntime the InferenceService names."""
    import kubernetes

    api = sim.api_client()
    kubernetes.client.CoreV1Api(api).create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=namespace))
    )
    kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
        "ome.io", "v1beta1", namespace, "servingruntimes", runtime_manifest(namespace)
    )
    api.close()


async def apply(client: Client, task_queue: str, manifest: dict[str, Any]) -> ApplyResult:
    """`apply` with start, as a user applies a spec: the workflow opens on the first apply."""
    metadata = manifest["metadata"]
    workflow_id = isvc_workflow_id(metadata["namespace"], metadata["name"])
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        INFERENCE_SERVICE,
        {"manifest": manifest, "cluster": BENCH_CLUSTER},
        id=workflow_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    result: ApplyResult = await client.execute_update_with_start_workflow(
        UPDATE_APPLY, manifest, start_workflow_operation=start, result_type=ApplyResult
    )
    return result


# --- kubesim snapshots ------------------------------------------------------------------


@dataclass(frozen=True)
class PodView:
    name: str
    uid: str
    index: int | None
    image: str
    ready: bool
    serving: bool
    terminating: bool
    component: str = ""
    pairing: str = ""
    """The `ome.io/pairing-protocol` label ("" without one)."""
    revision: str = ""
    """The `ome.io/revision` label ("" without one)."""


@dataclass(frozen=True)
class PodSnapshot:
    """The pods of one InferenceService at one instant."""

    pods: tuple[PodView, ...]

    def live(self) -> list[PodView]:
        return [pod for pod in self.pods if not pod.terminating]

    def serving_indexes(self, image: str | None = None) -> set[int]:
        """Instances with a live pod that is Ready and in rotation (optionally on `image`)."""
        return {
            pod.index
            for pod in self.live()
            if pod.index is not None and pod.ready and pod.serving and (image is None or pod.image == image)
        }

    def serving_tokens(self) -> set[str]:
        """The pairing-protocol tokens of the live pods that serve."""
        return {pod.pairing for pod in self.live() if pod.ready and pod.serving}

    def of(self, component: str) -> PodSnapshot:
        """The pods of one component."""
        return PodSnapshot(tuple(pod for pod in self.pods if pod.component == component))

    def live_by_index(self) -> dict[int | None, list[PodView]]:
        found: dict[int | None, list[PodView]] = {}
        for pod in self.live():
            found.setdefault(pod.index, []).append(pod)
        return found

    def end_state(self) -> set[tuple[str, int | None, str, str]]:
        """(name, Instance index, revision, image) of every live pod: what two runs of the same
        InferenceService in two namespaces must agree on, whoever ran the workflows."""
        return {(pod.name, pod.index, pod.revision, pod.image) for pod in self.live()}

    def settled_on(self, image: str, instances: int) -> bool:
        """Exactly one live pod per Instance 0..N-1, all on `image` and serving; none terminating."""
        by_index = self.live_by_index()
        return (
            len(self.pods) == instances
            and sorted(i for i in by_index if i is not None) == list(range(instances))
            and all(len(pods) == 1 for pods in by_index.values())
            and self.serving_indexes(image) == set(range(instances))
        )


VIEWS_KEPT = 20_000
"""Pod views `observe_pods` keeps by (uid, resourceVersion); past this many it starts again."""
_views: dict[tuple[str, str], PodView] = {}


def _view(pod: dict[str, Any]) -> PodView:
    """The pod as the bench reads it; a pod unchanged since the last look is not read again
    (the sampler looks every 100 ms, inside kubesim's loop, while the product runs beside it)."""
    metadata = pod.get("metadata") or {}
    key = (str(metadata.get("uid")), str(metadata.get("resourceVersion")))
    view = _views.get(key)
    if view is None:
        if len(_views) >= VIEWS_KEPT:
            _views.clear()
        view = _views[key] = _read_view(pod)
    return view


def _read_view(pod: dict[str, Any]) -> PodView:
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    conditions = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or []}
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    index = labels.get(LABEL_INDEX)
    return PodView(
        name=str(metadata.get("name")),
        uid=str(metadata.get("uid")),
        index=int(index) if index is not None and str(index).isdigit() else None,
        image=str(containers[0].get("image")),
        ready=conditions.get("Ready") == "True",
        serving=conditions.get(SERVING_GATE) == "True",
        terminating=metadata.get("deletionTimestamp") is not None,
        component=str(labels.get(LABEL_COMPONENT, "")),
        pairing=str(labels.get(LABEL_PAIRING, "")),
        revision=str(labels.get(LABEL_REVISION, "")),
    )


def observe_pods(sim: KubeSim, namespace: str, isvc: str) -> PodSnapshot:
    """The InferenceService's pods, read on kubesim's loop (no API request, no counter)."""

    def read() -> PodSnapshot:
        pods = sim.cluster.store.list(("", "pods"), namespace)
        mine = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_ISVC) == isvc]
        return PodSnapshot(tuple(_view(p) for p in mine))

    return sim.call(read)


# --- product processes ------------------------------------------------------------------


class ProductProcess:
    """`python -m workers` or `python -m workers.watcher` (or the floor's worker), pointed at
    one dev server and kubesim through the product's environment variables.

    Output goes to `log`; `ready_pattern` is the line that says it is serving (the worker's
    "polling task queue"); `env_extra` adds settings of its own (`OME_PROMETHEUS__URL`, ...).
    """

    def __init__(
        self,
        module: str,
        *,
        address: str,
        task_queue: str,
        kubeconfig: str,
        log: Path,
        ready_pattern: str | None = None,
        args: Sequence[str] = (),
        env_extra: Mapping[str, str] | None = None,
    ) -> None:
        self.module = module
        self.args = list(args)
        self.log = log
        self.ready_pattern = re.compile(ready_pattern) if ready_pattern else None
        # Settings from the developer's shell must not leak into the run.
        env = {name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)}
        env |= {
            f"{ENV_PREFIX}TEMPORAL__ADDRESS": address,
            f"{ENV_PREFIX}TEMPORAL__TASK_QUEUE": task_queue,
            f"{ENV_PREFIX}KUBE__KUBECONFIG": kubeconfig,
            "PYTHONUNBUFFERED": "1",
        }
        self.env = env | dict(env_extra or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.module} was never started"
        return self.process.pid

    def start(self, within: float = 120.0) -> None:
        """Start the process and wait for its ready line; fail with its output otherwise."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            out.write(f"\n=== start {self.starts + 1} of {self.module}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                cwd=REPO_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        if self.ready_pattern is None:
            return
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.ready_pattern.search(self.log.read_bytes()[offset:].decode(errors="replace")):
                return
            if self.process.poll() is not None:
                raise AssertionError(
                    f"{self.module} exited with code {self.process.returncode} before it was ready:\n"
                    f"{self.tail()}"
                )
            time.sleep(0.1)
        raise AssertionError(f"{self.module} was not ready within {within:.0f} s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, in-flight activities and workflow tasks are lost."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self, within: float = 40.0) -> None:
        """SIGTERM and wait (the worker lets in-flight activities finish), then SIGKILL."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.kill()

    def rss_kib(self) -> tuple[int, int]:
        """(current RSS, peak RSS) in KiB, from /proc."""
        fields: dict[str, int] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
        return fields["VmRSS"], fields["VmHWM"]

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no output)"


def worker_process(
    address: str, task_queue: str, kubeconfig: str, log: Path, env: Mapping[str, str] | None = None
) -> ProductProcess:
    """The product's worker; `env` adds settings, e.g. `{"OME_PROMETHEUS__URL": ...}` for canary analysis."""
    return ProductProcess(
        "workers",
        address=address,
        task_queue=task_queue,
        kubeconfig=kubeconfig,
        log=log,
        ready_pattern=r"polling task queue",
        env_extra=env,
    )


def worker_processes(
    count: int,
    address: str,
    task_queue: str,
    kubeconfig: str,
    logs: Path,
    env: Mapping[str, str] | None = None,
) -> list[ProductProcess]:
    """`count` workers on one task queue, each a process of its own logging to
    `logs/worker-<i>.log` (`logs/worker.log` for a single one): Temporal spreads the workflow
    and activity tasks over them, and a SIGKILL of one leaves the others running."""
    names = ["worker.log"] if count == 1 else [f"worker-{i + 1}.log" for i in range(count)]
    return [worker_process(address, task_queue, kubeconfig, logs / name, env) for name in names]


def watcher_process(address: str, task_queue: str, kubeconfig: str, log: Path) -> ProductProcess:
    return ProductProcess(
        "workers.watcher",
        address=address,
        task_queue=task_queue,
        kubeconfig=kubeconfig,
        log=log,
        ready_pattern=r"watcher starting",
    )


async def poll_until(what: str, probe: Callable[[], Any], within: float, every: float) -> Any:
    """Poll `probe` (sync or async) until it returns something truthy; `TimeoutError` naming
    `what` and the last answer otherwise. A probe that raises (a query while a workflow is
    still starting) counts as not yet."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if asyncio.iscoroutine(last):
                last = await last
        except Exception as error:  # noqa: BLE001 - a query may fail while a workflow starts
            last = error
        if last and not isinstance(last, Exception):
            return last
        await asyncio.sleep(every)
    raise TimeoutError(f"gave up after {within:.0f}s waiting for {what}; last saw {last!r}")
