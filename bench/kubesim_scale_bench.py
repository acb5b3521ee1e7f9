"""kubesim at fleet scale: N single-pod Instances brought up at once.

Each Instance is what the product makes: a headless Service selecting its own pod, a pod
with the `ome.io/serving` readiness gate, a `list pods` by the Instance's labels after the
create, and the serving condition set once the containers are ready. One component Service
selects every serving pod, and one PodDisruptionBudget counts them (as the product's). The bench runs kubesim in-process (a fresh interpreter per N),
drives it through the same `Api` calls the HTTP server makes, and waits until the component
Service's EndpointSlices list all N pods ready. It prints, per N:

  - wall time per pod (from the first create to all N listed ready);
  - CPU of the endpoint controller's reconciles, of each other controller, and of the
    Instances' label-selected pod lists;
  - the EndpointSlices of the component Service and their largest size.

    .venv/bin/python bench/kubesim_scale_bench.py [--pods 200,1000,2000]
    .venv/bin/python bench/kubesim_scale_bench.py --kubesim-path /tmp/kubesim_before   # another copy

`--kubesim-path DIR` imports the `kubesim` package found in DIR instead of this checkout's
(how the before/after figures in the report were taken).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NS = "bench"
SLICES = ("discovery.k8s.io", "endpointslices")
SERVING = "ome.io/serving"
# Instances created between yields to the event loop (a burst of workflow activities).
WAVE = 20


def _timed(spent: dict[str, float], name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    def wrapper() -> Any:
        started = time.thread_time()
        try:
            return fn()
        finally:
            spent[name] += time.thread_time() - started
    return wrapper


def _ready_listed(store: Any, service: str) -> tuple[int, int, int]:
    """(ready endpoints, slices, largest slice) of a Service's EndpointSlices."""
    ready = count = largest = 0
    for obj in store.list(SLICES, NS):
        if (obj["metadata"].get("labels") or {}).get("kubernetes.io/service-name") != service:
            continue
        endpoints = obj.get("endpoints") or []
        count += 1
        largest = max(largest, len(endpoints))
        ready += sum(1 for e in endpoints if (e.get("conditions") or {}).get("ready"))
    return ready, count, largest


async def bring_up(pods: int) -> dict[str, Any]:
    from kubesim.cluster import Cluster
    from kubesim.timing import Timing

    nodes = pods // 100 + 1
    cluster = Cluster(f"zones=1,nodes-per-zone={nodes},gpus=8",
                      Timing(pull_seconds=0, start_seconds=0, ready_seconds=0, factor=0.001))
    await cluster.start()
    api = cluster.api
    spent: dict[str, float] = defaultdict(float)
    for controller in cluster.controllers:
        controller.reconcile = _timed(spent, controller.name, controller.reconcile)  # type: ignore[method-assign]
    pods_rt, services_rt = api.type_of("", "pods"), api.type_of("", "services")
    api.create(api.type_of("", "namespaces"), "", {"metadata": {"name": NS}}, "bench")
    selector = {"app": "model", "component": "engine"}
    api.create(services_rt, NS, {"metadata": {"name": "model-engine"}, "spec": {
        "selector": selector, "ports": [{"name": "http", "port": 8080}]}}, "bench")
    api.create(api.type_of("policy", "poddisruptionbudgets"), NS, {"metadata": {"name": "model-engine"}, "spec": {
        "maxUnavailable": 1, "selector": {"matchLabels": selector}}}, "bench")
    started = time.perf_counter()
    cpu_started = time.process_time()
    for index in range(pods):
        labels = {**selector, "index": str(index)}
        api.create(services_rt, NS, {"metadata": {"name": f"model-engine-{index}", "labels": labels}, "spec": {
            "clusterIP": "None", "selector": labels, "ports": [{"name": "http", "port": 8080}]}}, "bench")
        api.create(pods_rt, NS, {"metadata": {"name": f"model-engine-{index}-0", "labels": labels}, "spec": {
            "containers": [{"name": "engine", "image": "engine:1"}],
            "readinessGates": [{"conditionType": SERVING}]}}, "bench")
        # The Instance lists its own pods by label right after creating them.
        listed = time.thread_time()
        api.list(pods_rt, NS, ",".join(f"{k}={v}" for k, v in labels.items()))
        spent["instance list pods"] += time.thread_time() - listed
        if index % WAVE == WAVE - 1:
            await asyncio.sleep(0)
    serving: set[str] = set()
    deadline = time.perf_counter() + 1800
    while time.perf_counter() < deadline:
        # The Instances admit their pods as soon as the containers are ready.
        for pod in api.list(pods_rt, NS, "app=model")["items"]:
            name = pod["metadata"]["name"]
            conditions = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
            if name not in serving and conditions.get("ContainersReady", {}).get("status") == "True":
                status = {**pod["status"], "conditions": [*pod["status"]["conditions"], {
                    "type": SERVING, "status": "True", "reason": "Admitted"}]}
                api.write_status(pods_rt, pod, status, "bench")
                serving.add(name)
                if len(serving) % WAVE == 0:
                    await asyncio.sleep(0)
        if _ready_listed(cluster.store, "model-engine")[0] == pods:
            break
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    ready, count, largest = _ready_listed(cluster.store, "model-engine")
    await cluster.stop()
    return {"pods": pods, "ready": ready, "seconds": elapsed, "cpu": cpu, "slices": count, "largest": largest,
            "spent": dict(spent)}


def _child(pods: int) -> None:
    print(json.dumps(asyncio.run(bring_up(pods))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", default="200,1000,2000", help="comma-separated Instance counts")
    parser.add_argument("--kubesim-path", default="", help="a directory holding another `kubesim` package")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return 0
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (args.kubesim_path, str(ROOT)) if p)
    print(f"kubesim from {args.kubesim_path or ROOT}")
    for pods in (int(p) for p in args.pods.split(",")):
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(pods)],
                             cwd="/", env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(out.stderr[-3000:])
            return 1
        r = json.loads(out.stdout.strip().splitlines()[-1])
        spent = r["spent"]
        others = ", ".join(f"{k} {v:.2f}s" for k, v in sorted(spent.items(), key=lambda kv: -kv[1])
                           if k != "endpoint-controller")
        print(f"N={pods}: {r['seconds'] / pods * 1000:.2f} ms/pod wall ({r['seconds']:.1f}s total, "
              f"process CPU {r['cpu']:.1f}s); endpoint-controller CPU {spent.get('endpoint-controller', 0):.2f}s; "
              f"{r['ready']}/{pods} ready in {r['slices']} slice(s), largest {r['largest']}")
        print(f"    other CPU: {others}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
