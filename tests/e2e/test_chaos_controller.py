"""Chaos: the controller killed (SIGKILL) at random moments during 50 `kubectl apply` edits.

The real InferenceService workflow (worker with the real activities against kubesim) and the
real `python -m workers.controller` process, which the test kills at a random moment after
about a third of the edits and starts again, as a crash-looping pod would be. Each edit waits
until the workflow holds it, so that every edit must be relayed (none is skipped by a later
one); in the end every InferenceService is on its last spec and every edit was applied exactly
once: the workflow's generation count is 1 + the number of edits, and the object's
observedGeneration is its generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.e2e.running_stack import REPO_ROOT
from tests.workflows.service_harness import NAME, Story, eventually, isvc_manifest, story
from workflows.service.messages import AppliedView
from workflows.service.workflow import InferenceServiceWorkflow

EDITS = 50
SEED = 20261202


class Controller:
    """`python -m workers.controller` against the test's Temporal and kubesim; killed and restarted."""

    def __init__(self, client: Client, task_queue: str, sim: KubeSim, log: Path) -> None:
        self.env = {
            **os.environ,
            "OME_TEMPORAL__ADDRESS": client.service_client.config.target_host,
            "OME_TEMPORAL__TASK_QUEUE": task_queue,
            "OME_KUBE__KUBECONFIG": str(sim.kubeconfig_path),
            # A crash-restarted controller keeps its identity (a pod's name), so it takes its
            # own Lease back at once instead of waiting out the dead process's lease.
            "OME_LEADER__IDENTITY": "controller-under-test",
        }
        self.log = log
        self.process: asyncio.subprocess.Process | None = None
        self.kills = 0

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "workers.controller",
                env=self.env,
                cwd=REPO_ROOT,
                stdout=out,
                stderr=out,
            )

    async def kill(self) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        self.kills += 1

    async def stop(self) -> int | None:
        """SIGTERM it; its exit code (None: it was not running)."""
        if self.process is None or self.process.returncode is not None:
            return None
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), 30)


async def kubectl_apply(sim: KubeSim, manifest: dict[str, Any]) -> None:
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(sim.kubeconfig_path), "apply", "-f", "-",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate(json.dumps(manifest).encode())
    assert process.returncode == 0, err.decode()


def edit(number: int) -> dict[str, Any]:
    """The number-th edit: a spec that differs from the one before (maxReplicas 2, 3, 4, 2, ...)."""
    manifest = isvc_manifest(minReplicas=1, maxReplicas=2 + number % 3)
    manifest["spec"]["engine"].pop("topologySpread")
    manifest["spec"]["engine"].pop("topologySpreadKey")
    return manifest


async def applied(s: Story) -> AppliedView | None:
    with contextlib.suppress(Exception):  # not started yet
        view: AppliedView = await s.handle().query(InferenceServiceWorkflow.applied)
        return view
    return None


@pytest.mark.timeout(300)
async def test_killing_the_controller_during_50_edits_applies_each_once_and_ends_on_the_last(
    dev_client: Client, task_queue: str, kubesim: KubeSim, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    controller = Controller(dev_client, task_queue, kubesim, tmp_path / "controller.log")
    async with story(dev_client, task_queue, kubesim) as s:
        await controller.start()
        try:
            for number in range(EDITS + 1):  # the create, then 50 edits
                await kubectl_apply(kubesim, edit(number))
                if number and rng.random() < 0.35:
                    # Somewhere in the relay: before the watch event, mid-Update, before the query.
                    await asyncio.sleep(rng.uniform(0.0, 0.4))
                    await controller.kill()
                    await controller.start()

                async def holds(want: int = number + 1) -> bool:
                    view = await applied(s)
                    return view is not None and view.generation >= want

                began = time.monotonic()
                await eventually(
                    holds, f"edit {number} applied (controller kills so far: {controller.kills})"
                )
                assert time.monotonic() - began < 60
        finally:
            stopped = await controller.stop()
        # 1: its stop hung and `workers.stopping` ended it, after logging what still ran.
        assert stopped in (None, 0), f"the controller's stop ended with code {stopped}:\n{controller.log.read_text()[-6000:]}"
        view = await applied(s)
        assert view is not None
        obj = s.object("inferenceservices", NAME)
        assert obj is not None
        assert view.generation == EDITS + 1, (
            f"{view.generation} applies for {EDITS + 1} specs: an edit applied twice"
        )
        assert view.object_generation == obj["metadata"]["generation"] == EDITS + 1
        assert obj["spec"] == edit(EDITS)["spec"]

        def observed() -> bool:
            now = s.object("inferenceservices", NAME) or {}
            return (now.get("status") or {}).get("observedGeneration") == EDITS + 1

        await eventually(observed, "status.observedGeneration of the last edit")
        assert controller.kills >= 10, f"only {controller.kills} kills: the seed no longer exercises restarts"
        log = (tmp_path / "controller.log").read_text()
        # Some were killed before they logged a line; most restarts got going and relayed.
        assert controller.kills // 2 <= log.count("controller starting") <= controller.kills + 1, log[-3000:]
