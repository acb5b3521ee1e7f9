"""The Temporal dev server SIGKILLed in the middle of a blue-green rollout group's run, then
restarted on the same database: nothing the user started is lost, nothing is done twice.

mistral-pd with 4 engines and 2 decoders in one blue-green group (seed 004), the worker and
the watcher as their own processes (never killed here; they reconnect by themselves), kubesim
in this process. The server dies while the run moves the group; when it is back, the run
goes on from its history and completes: every engine and decoder Instance on the new image,
one pod each, never fewer than the desired Instances serving, a same-token engine+decoder pair
serving in every sample of the pairing-protocol change (kv-v1 -> kv-v2), the router untouched.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from temporalio.client import Client

from bench.lifecycle_stack import (
    IMAGE_1,
    IMAGE_2,
    apply,
    observe_pods,
    topology_for,
    watcher_process,
    worker_process,
)
from kubesim.handle import KubeSim
from kubesim.timing import Timing
from tests.e2e.running_stack import free_ports
from tests.e2e.test_chaos_rollout import KV_V1, KV_V2, RolloutSampler, prepare, settled, until_settled
from tests.workflows.rollout_examples import NAME, pd_manifest
from workers.client import DATA_CONVERTER
from workers.devserver import dev_server_argv, ensure_search_attributes
from workflows.names import rollout_workflow_id
from workflows.rollout.messages import RolloutView

pytestmark = pytest.mark.e2e

SETTLE_WITHIN = 180.0


@pytest.fixture
def cluster() -> Iterator[KubeSim]:
    sim = KubeSim(topology=topology_for(32), crds="product", timing=Timing.fast()).start()
    sim.set_default_timing(pull_seconds=0.0, start_seconds=0.0, ready_seconds=0.5, factor=1.0)
    try:
        yield sim
    finally:
        sim.stop()


class Server:
    """`temporal server start-dev` on a fixed port and database, killable and restartable."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        port, ui_port = free_ports(2)
        self.address = f"127.0.0.1:{port}"
        self.argv = dev_server_argv(data_dir, port, ui_port, "default")
        self.log = data_dir / "server.log"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> Client:
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(*self.argv, stdout=out, stderr=asyncio.subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                client = await Client.connect(self.address, data_converter=DATA_CONVERTER)
                await client.count_workflows()
                return client
            except Exception:  # noqa: BLE001 - not serving yet
                assert time.monotonic() < deadline, self.log.read_text()[-2000:]
                await asyncio.sleep(0.3)

    async def kill(self) -> None:
        """SIGKILL: no shutdown of its own, the database as the crash left it."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.kill()
        await asyncio.wait_for(self.process.wait(), 10)


async def test_dev_server_killed_mid_run_and_restarted_on_its_database(cluster: KubeSim, tmp_path: Path) -> None:
    server = Server(tmp_path / "temporal")
    client = await server.start()
    await ensure_search_attributes(client)
    task_queue = f"tq-{uuid4()}"
    namespace = f"server-kill-{uuid4().hex[:8]}"
    worker = worker_process(server.address, task_queue, cluster.kubeconfig_path, tmp_path / "worker.log")
    watcher = watcher_process(server.address, task_queue, cluster.kubeconfig_path, tmp_path / "watcher.log")
    prepare(cluster, namespace)
    worker.start()
    watcher.start()
    try:
        await apply(client, task_queue, pd_manifest(namespace, KV_V1, IMAGE_1, (4, 2)))
        await until_settled(cluster, namespace, {"engine": IMAGE_1, "decoder": IMAGE_1}, SETTLE_WITHIN)

        async with RolloutSampler(cluster, namespace) as sampler:
            await apply(client, task_queue, pd_manifest(namespace, KV_V2, IMAGE_2, (4, 2)))
            await asyncio.sleep(1.0)
            seen = await asyncio.to_thread(observe_pods, cluster, namespace, NAME)
            assert not settled(seen, {"engine": IMAGE_2, "decoder": IMAGE_2}), "the kill must land during the run"
            await server.kill()
            await asyncio.sleep(1.0)
            client = await server.start()
            await until_settled(cluster, namespace, {"engine": IMAGE_2, "decoder": IMAGE_2}, SETTLE_WITHIN)

        sampler.check()
        sampler.check_tokens(await asyncio.to_thread(observe_pods, cluster, namespace, NAME))
        run = client.get_workflow_handle(rollout_workflow_id(namespace, NAME, 2), result_type=RolloutView)
        assert (await asyncio.wait_for(run.result(), 90)).outcome == "Completed"
        assert worker.starts == 1 and watcher.starts == 1, "neither process was restarted: they reconnected"
    finally:
        worker.kill()
        watcher.stop(within=10)
        await server.kill()
