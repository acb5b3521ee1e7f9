"""omectl against the real workflows: a worker with the real activities on kubesim, a pod relay
for the watcher, the dev server. One story per command family: `apply` (a runtime to the
cluster, an InferenceService through its Update, `--wait` to Ready, a refusal with its reason
code, a timeout naming what blocks), `get` (every InferenceService-side table), and the
actions (a refused `promote` with the reference's text, `pause`/`resume`, a node drain)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.workers.omectl.cli import omectl_runner
from tests.workflows.service_harness import IMAGE_2, NAME, isvc_manifest, runtime_manifest, story, with_image
from workflows.service.canary_requests import REFUSED_NO_RUN

NAMESPACE = "omectl-real"


def write(path: Path, *docs: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def in_namespace(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = copy.deepcopy(manifest)
    manifest["metadata"]["namespace"] = NAMESPACE
    return manifest


async def test_apply_get_and_act_on_the_real_workflows(
    monkeypatch: pytest.MonkeyPatch, dev_client: Client, task_queue: str, kubesim: KubeSim, tmp_path: Path
) -> None:
    omectl = omectl_runner(monkeypatch, dev_client, task_queue, kubesim.kubeconfig_path)
    extra_runtime = in_namespace(runtime_manifest())
    extra_runtime["metadata"]["name"] = "srt-extra"
    manifest = in_namespace(isvc_manifest())
    async with story(dev_client, task_queue, kubesim, namespace=NAMESPACE):
        # apply: the runtime to the cluster, the InferenceService through its Update, to Ready
        applied = await omectl("apply", "-f", write(tmp_path / "a.yaml", extra_runtime, manifest), "--wait", "--timeout", "90s")
        assert applied.exit_code == 0, applied.output
        out = applied.stdout.splitlines()
        assert out[:3] == [
            "servingruntime.ome.io/srt-extra created",
            f"inferenceservice.ome.io/{NAME} accepted (generation 1, changed)",
            f"waiting for {NAMESPACE}/{NAME} generation 1 to be Ready (timeout 90s)",
        ]
        assert "generation 1 (Ready): engine 2/2 serving" in out
        assert out[-1] == f"{NAMESPACE}/{NAME} is Ready"

        # get: every table read from the workflows' queries
        services = await omectl("get", "isvc", "-n", NAMESPACE)
        assert services.exit_code == 0, services.output
        assert services.stdout.splitlines()[1].split()[:6] == [NAME, "Ready", "1", "True", "false", "engine=2/2"]
        replicas = await omectl("get", "irep", "-n", NAMESPACE, "-o", "wide")
        assert replicas.stdout.splitlines()[1].split()[:8] == [f"{NAME}-engine", "engine", "2", "2", "2", "2", NAME, "Ready=True"]
        one = await omectl("get", "irep", f"{NAME}-engine", "-n", NAMESPACE, "-o", "json")
        assert one.exit_code == 0, one.output
        (answered,) = json.loads(one.stdout)
        assert (answered["workflow_id"], answered["component"]) == (f"irep/{NAMESPACE}/{NAME}-engine", "engine")
        status = answered["status"]
        assert (status["replicas"], status["readyReplicas"], len(status["instanceStatuses"])) == (2, 2, 2)
        instances = await omectl("get", "instances", NAME, "-n", NAMESPACE)
        rows = [line.split() for line in instances.stdout.splitlines()[1:]]
        assert [(row[0], row[1], row[2], row[3], row[5], row[6]) for row in rows] == [
            ("engine", "0/1", "Ready", "1/1/1", "A--", "OK"),
            ("engine", "1/1", "Ready", "1/1/1", "A--", "OK"),
        ]
        blocks = await omectl("get", "retry-blocks", NAME, "-n", NAMESPACE)
        assert blocks.stdout.splitlines()[1].split() == ["-", "EMPTY", "-", "-", "-", "NO", "-"]
        migrations = await omectl("get", "migrations", NAME, "-n", NAMESPACE, "-o", "yaml")
        assert migrations.exit_code == 0
        assert yaml.safe_load(migrations.stdout) == [
            {"workflow_id": f"irep/{NAMESPACE}/{NAME}-engine", "component": "engine", "migrations": []}
        ]

        # actions: promote without a canary run is refused with the reference's text
        promote = await omectl("promote", NAME, "-n", NAMESPACE)
        assert promote.exit_code == 1
        assert promote.stderr.splitlines()[-1] == REFUSED_NO_RUN

        # a paused service does not roll: the wait times out naming the pause
        assert (await omectl("pause", NAME, "-n", NAMESPACE)).exit_code == 0
        changed = write(tmp_path / "b.yaml", with_image(manifest, IMAGE_2))
        held = await omectl("apply", "-f", changed, "--wait", "--timeout", "3s")
        assert held.exit_code == 1
        assert f"inferenceservice.ome.io/{NAME} accepted (generation 2, changed)" in held.stdout
        assert held.stderr.strip() == (
            f"timed out after 3s waiting for {NAMESPACE}/{NAME} to be Ready: blocked by "
            f"pause=true: changes wait for `omectl resume {NAME} -n {NAMESPACE}`"
        )
        assert (await omectl("resume", NAME, "-n", NAMESPACE)).exit_code == 0
        rolled = await omectl("apply", "-f", changed, "--wait", "--timeout", "90s")
        assert rolled.exit_code == 0, rolled.output
        assert f"inferenceservice.ome.io/{NAME} accepted (generation 2, unchanged)" in rolled.stdout

        # admission refuses: reason code and exit 1, nothing else applied
        invalid = in_namespace(isvc_manifest())
        invalid["metadata"]["name"] = "refused"
        invalid["spec"]["engine"].update({"minReplicas": 3, "maxReplicas": 1})
        refused = await omectl("apply", "-f", write(tmp_path / "c.yaml", invalid))
        assert refused.exit_code == 1
        assert refused.stderr.startswith("inferenceservice.ome.io/refused refused [")
        assert "InferenceService refused by admission" in refused.stderr
