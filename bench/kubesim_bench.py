"""kubesim throughput and watch latency.

Starts `python -m kubesim` in its own process (so the server has a core to itself, as an API
server would) and measures from this process:

  1. create+get requests per second on ConfigMaps, with a few concurrent keep-alive clients;
  2. the latency from a write to its delivery on 50 concurrent watches (p50 / p95 / max).

    .venv/bin/python bench/kubesim_bench.py [--seconds 5] [--watchers 50] [--events 200]

Goal: at least 500 simple requests per second on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
GOAL_RPS = 500


def start_server(workdir: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig", f"{workdir}/kubeconfig",
         "--topology", "zones=1,nodes-per-zone=1,gpus=8", "--crds", "none"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("kubesim listening on "):
        raise SystemExit(f"kubesim did not start: {line!r}")
    return proc, line.split()[3]


async def create_get(url: str, seconds: float, clients: int) -> tuple[int, float]:
    base = f"{url}/api/v1/namespaces/default/configmaps"
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker(index: int, session: aiohttp.ClientSession) -> None:
        nonlocal done
        n = 0
        while time.perf_counter() < stop_at:
            name = f"bench-{index}-{n}"
            async with session.post(base, data=json.dumps({"metadata": {"name": name}, "data": {"n": str(n)}})) as r:
                assert r.status == 201, await r.text()
                await r.read()
            async with session.get(f"{base}/{name}") as r:
                assert r.status == 200
                await r.read()
            done += 2
            n += 1

    started = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(i, session) for i in range(clients)))
    return done, time.perf_counter() - started


async def watch_latency(url: str, watchers: int, events: int) -> list[float]:
    base = f"{url}/api/v1/namespaces/kube-public/configmaps"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        async with session.get(base) as r:
            rv = (await r.json())["metadata"]["resourceVersion"]
        latencies: list[float] = []
        ready = asyncio.Barrier(watchers + 1)

        async def watcher() -> None:
            query = f"?watch=true&resourceVersion={rv}&timeoutSeconds=120"
            async with session.get(base + query) as resp:
                await ready.wait()
                seen = 0
                async for line in resp.content:
                    event = json.loads(line)
                    sent = float(event["object"]["metadata"]["annotations"]["sent"])
                    latencies.append(time.perf_counter() - sent)
                    seen += 1
                    if seen == events:
                        return

        tasks = [asyncio.create_task(watcher()) for _ in range(watchers)]
        await ready.wait()
        for n in range(events):
            body = {"metadata": {"name": f"w-{n}", "annotations": {"sent": repr(time.perf_counter())}}}
            async with session.post(base, data=json.dumps(body)) as r:
                assert r.status == 201
            await asyncio.sleep(0.005)
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        proc, url = start_server(workdir)
        try:
            done, elapsed = asyncio.run(create_get(url, args.seconds, args.clients))
            rps = done / elapsed
            print(f"create+get: {done} requests in {elapsed:.2f}s = {rps:.0f} requests/s "
                  f"({args.clients} keep-alive clients; goal >= {GOAL_RPS}: {'met' if rps >= GOAL_RPS else 'MISSED'})")
            lat = sorted(asyncio.run(watch_latency(url, args.watchers, args.events)))
            p95 = lat[int(len(lat) * 0.95) - 1]
            print(f"watch delivery ({args.watchers} watchers x {args.events} events = {len(lat)} deliveries): "
                  f"p50 {statistics.median(lat) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms")
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
