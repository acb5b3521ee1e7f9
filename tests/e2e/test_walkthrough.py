"""The README's "Walkthrough", command by command, exactly as written, against the running stack.

The commands run in one bash session (`set -euo pipefail`, so the first failing command fails
the test) from a directory that looks like the repository root after `make up`: `.data` is the
stack's data directory, `deploy` and `.venv` are the repository's. Only the Temporal address
comes from outside (`TEMPORAL_ADDRESS`, which the `temporal` CLI reads), because the test's
stack listens on free ports rather than 7233. The outputs are then checked for what the
README says they show.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.running_stack import REPO_ROOT, RunningStack
from tests.fixtures.prometheus import require_prometheus

README = REPO_ROOT / "README.md"
MARKER = ">>> command"
WALKTHROUGH_WITHIN = 280.0
"""Seconds for the whole walkthrough: two rolling updates and a deletion in real kubesim time."""
BAD_IMAGE = "docker.io/lmsysorg/sglang:v0.5.6-bad"
"""The image `deploy/examples/kubesim-bad-image.json` tells kubesim to fail."""


def walkthrough_commands(readme: str, heading: str = "Walkthrough") -> list[str]:
    """Every command of the `## <heading>` section's bash blocks, continuation lines joined."""
    section = readme.split(f"\n## {heading}\n", 1)[1]
    section = re.split(r"\n## (?!#)", section, maxsplit=1)[0]
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL):
        pending = ""
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pending += line + "\n"
            if not line.endswith("\\"):
                commands.append(pending.rstrip("\n"))
                pending = ""
    return commands


def run_walkthrough(stack: RunningStack, workdir: Path, commands: list[str]) -> tuple[list[str], str]:
    """Run the commands in one bash session: the output of each, in order, and all of stderr."""
    (workdir / ".data").symlink_to(stack.data_dir.resolve())
    (workdir / "deploy").symlink_to(REPO_ROOT / "deploy")
    (workdir / ".venv").symlink_to(REPO_ROOT / ".venv")
    script = ["set -euo pipefail"]
    for index, command in enumerate(commands):
        script += [f'echo "{MARKER} {index} at ${{SECONDS}}s"', command]
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    env["TEMPORAL_ADDRESS"] = stack.address
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=WALKTHROUGH_WITHIN,
    )
    parts = re.split(rf"^{MARKER} \d+ at \d+s$\n?", result.stdout, flags=re.MULTILINE)[1:]
    if result.returncode != 0:
        failed = commands[len(parts) - 1] if parts else "(before the first command)"
        # The markers carry bash's clock, so a slow step shows in the transcript.
        transcript = (
            "\n".join(
                f"$ {command}\n{output[-1500:]}" for command, output in zip(commands, parts, strict=False)
            )
            + "\n"
            + "\n".join(re.findall(rf"^{MARKER} \d+ at \d+s$", result.stdout, flags=re.MULTILINE))
        )
        raise AssertionError(
            f"walkthrough command failed (exit {result.returncode}):\n{failed}\n"
            f"transcript:\n{transcript}\nstderr:\n{result.stderr[-4000:]}\n"
            f"stack log:\n{stack.log()[-6000:]}"
        )
    # Shown with the test's output when it fails later: how long each step took.
    print("\n".join(re.findall(rf"^{MARKER} \d+ at \d+s$", result.stdout, flags=re.MULTILINE)))
    return parts, result.stderr


def output_of(commands: list[str], outputs: list[str], starts_with: str, nth: int = 0) -> str:
    matches = [out for command, out in zip(commands, outputs, strict=True) if command.startswith(starts_with)]
    return matches[nth]


@pytest.mark.timeout(360)
def test_readme_walkthrough_runs_as_written(stack: RunningStack, tmp_path: Path) -> None:
    commands = walkthrough_commands(README.read_text())
    assert len(commands) >= 20, f"the walkthrough lost its commands: {commands}"
    outputs, stderr = run_walkthrough(stack, tmp_path, commands)

    applied = output_of(commands, outputs, "temporal workflow execute-update-with-start")
    assert "UpdateResult  map[accepted:true changed:true generation:1 superseded:false warnings:[]]" in applied, applied

    irep = output_of(commands, outputs, "kubectl get irep")
    assert re.search(r"qwen3-0-6b-engine\s+engine\s+2\s+2\s+2\s+2", irep), irep

    spread = output_of(commands, outputs, "kubectl get inferencereplica qwen3-0-6b-engine")
    assert re.search(r"qwen3-0-6b-engine\s+Required\s+topology.kubernetes.io/zone\s+<none>", spread), spread

    pods = output_of(commands, outputs, "kubectl get pods -n spread-demo -l")
    rows = [line.split() for line in pods.strip().splitlines()[1:]]
    assert [row[0] for row in rows] == ["qwen3-0-6b-engine-0-default-0", "qwen3-0-6b-engine-1-default-0"], (
        pods
    )
    assert all(row[1:3] == ["topology.kubernetes.io/zone", "DoNotSchedule"] for row in rows), pods
    zones = dict(
        line.split()[0::5] for line in output_of(commands, outputs, "kubectl get nodes").splitlines()[1:]
    )
    assert len({zones[row[3]] for row in rows}) == 2, f"both Instances in one zone:\n{pods}\n{zones}"

    images = output_of(commands, outputs, "kubectl get pods -n spread-demo -l", nth=1)
    new_image = "docker.io/lmsysorg/sglang:v0.5.6-cu129-amd64"
    assert images.count(new_image) == 2 and "-default-1" in images, images

    paused = output_of(
        commands,
        outputs,
        "kubectl get inferencereplica qwen3-0-6b-engine -n spread-demo -o 'custom-columns=PAUSED",
    )
    assert paused.split()[-2:] == ["true", "0"], paused

    # The Instance's Kubernetes calls are local activities: one marker each in its history.
    history = output_of(commands, outputs, "temporal workflow show")
    assert "MarkerRecorded" in history and "WorkflowExecutionSignaled" in history, history

    # kubectl says so on stderr, and it is the last thing the walkthrough prints there.
    gone = output_of(commands, outputs, "kubectl get pods,inferencereplicas,inferenceservices")
    assert gone == "" and stderr.rstrip().endswith("No resources found in spread-demo namespace."), stderr

    # The UI's filter: every workflow of the service, found by its search attribute, ended.
    query = 'InferenceService="qwen3-0-6b" AND ExecutionStatus="Completed"'
    deadline = time.monotonic() + 30
    while True:
        listed = stack.temporal_json("workflow", "list", "--query", query)
        types = sorted(item["type"]["name"] for item in listed)
        if (
            types == ["InferenceReplica", "InferenceService", "Instance", "Instance"]
            or time.monotonic() > deadline
        ):
            break
        time.sleep(1)
    assert types == ["InferenceReplica", "InferenceService", "Instance", "Instance"], listed


@pytest.mark.timeout(300)
def test_readme_rollout_groups_walkthrough_runs_as_written(stack: RunningStack, tmp_path: Path) -> None:
    commands = walkthrough_commands(README.read_text(), "Walkthrough: rollout groups")
    assert len(commands) >= 12, f"the rollout walkthrough lost its commands: {commands}"
    outputs, _ = run_walkthrough(stack, tmp_path, commands)

    preview = output_of(commands, outputs, "temporal workflow query --workflow-id isvc/mistral-demo/mistral-pd --name preview")
    assert "BlueGreen" in preview and "engine" in preview and "decoder" in preview, preview

    status = output_of(commands, outputs, "temporal workflow query --workflow-id isvc/mistral-demo/mistral-pd --name rollout_status")
    assert "BlueGreen" in status and "2" in status, status

    completed = output_of(commands, outputs, "temporal workflow result --workflow-id rollout/mistral-demo/mistral-pd/2")
    assert "Completed" in completed, completed
    protocol = output_of(commands, outputs, "temporal workflow result --workflow-id rollout/mistral-demo/mistral-pd/3")
    assert "Completed" in protocol, protocol

    pods = output_of(commands, outputs, "kubectl get pods -n mistral-demo -L")
    paired = [line.split() for line in pods.strip().splitlines()[1:] if "kv-v2" in line]
    assert {row[-2] for row in paired} == {"engine", "decoder"}, pods

    digest = output_of(commands, outputs, "kubectl get inferenceservice mistral-pd -n mistral-demo -o jsonpath")
    assert digest.strip() == "rp1:cca45ec1fb0f", digest


@pytest.mark.timeout(300)
def test_readme_canary_walkthrough_runs_as_written(stack: RunningStack, tmp_path: Path) -> None:
    require_prometheus()
    commands = walkthrough_commands(README.read_text(), "Walkthrough: canary with Prometheus analysis")
    assert len(commands) >= 20, f"the canary walkthrough lost its commands: {commands}"
    outputs, _ = run_walkthrough(stack, tmp_path, commands)

    apply = "temporal workflow execute-update-with-start"
    for nth, generation in enumerate([1, 2, 3]):
        applied = output_of(commands, outputs, apply, nth=nth)
        assert f"map[accepted:true changed:true generation:{generation} superseded:false warnings:[]]" in applied, applied

    marked = json.loads(output_of(commands, outputs, "kubectl create --raw /sim/traffic/images"))
    assert {"image": BAD_IMAGE, "error_ratio": 0.3, "ttft_seconds": 0.2} in marked["images"], marked

    # The bad image: run 2 opens, two failing samples roll it back, and its history says so.
    opened = output_of(commands, outputs, "temporal workflow query --workflow-id isvc/canary-demo/mistral-pd --name rollout_status")
    assert '"run":2' in opened, opened
    status = "kubectl get inferenceservice mistral-pd -n canary-demo -o jsonpath"
    rolled = re.fullmatch(r"RolledBack failed=2 error_rate=(\S+)\n", output_of(commands, outputs, status, nth=0))
    assert rolled and float(rolled[1]) > 0.05, output_of(commands, outputs, status, nth=0)
    samples = output_of(commands, outputs, "temporal workflow show --workflow-id rollout/canary-demo/mistral-pd/2")
    for number in (1, 2):
        verdicts = re.findall(rf"summary: step 1 sample {number}: Fail \(error_rate \S+ >= 0\.05\)", samples)
        assert len(verdicts) == 2, f"the sample's result and the wait after it:\n{samples}"
    assert "step 1 sample 3" not in samples, samples
    rollback = output_of(commands, outputs, "kubectl get events -n canary-demo --field-selector reason=CanaryRollingBack")
    assert "(cause analysis: 2 failing sample(s) reached failureLimit 2)" in rollback, rollback

    # The good image: it passes analysis, waits at the manual gate, and a promote takes it to Stable.
    why = output_of(commands, outputs, "temporal workflow query --workflow-id isvc/canary-demo/mistral-pd --name explain")
    assert re.search(r"engine is at canary step 2/3 \(Paused\), traffic 50% -(>|\\u003e) 50%; canary \w+ step 2/3 waits at "
                     r"its manual gate \(pause: \{\}\); released by promote", why), why
    gate = re.fullmatch(r"step=1 error_rate=(\S+) traffic=50 50\n", output_of(commands, outputs, status, nth=1))
    assert gate and float(gate[1]) < 0.05, output_of(commands, outputs, status, nth=1)
    promoted = output_of(commands, outputs, "temporal workflow update execute --workflow-id isvc/canary-demo/mistral-pd --name promote")
    assert re.search(r"Result\s+promote accepted: step 2/3 of canary \w+ passes its manual gate", promoted), promoted
    completed = output_of(commands, outputs, "temporal workflow result --workflow-id rollout/canary-demo/mistral-pd/3")
    assert "COMPLETED" in completed and '"outcome":"Completed"' in completed, completed
    assert output_of(commands, outputs, status, nth=2) == "Stable step=3 traffic=100\n"


@pytest.mark.timeout(300)
def test_readme_migration_and_drain_walkthrough_runs_as_written(stack: RunningStack, tmp_path: Path) -> None:
    commands = walkthrough_commands(README.read_text(), "Walkthrough: migrate an Instance and drain a node")
    assert len(commands) >= 18, f"the migration walkthrough lost its commands: {commands}"
    outputs, _ = run_walkthrough(stack, tmp_path, commands)

    uuid = "8d0c6f7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f"
    started = output_of(commands, outputs, "temporal workflow update execute --workflow-id isvc/fleet-demo")
    assert uuid in started and f"migration/fleet-demo/qwen3-0-6b-engine-0/{uuid}" in started, started
    result = output_of(commands, outputs, "temporal workflow result --workflow-id migration/")
    assert "Completed" in result and "migrated to instance=4" in result, result

    rows = output_of(commands, outputs, "kubectl get inferencereplica qwen3-0-6b-engine -n fleet-demo")
    assert rows.strip() == f"{uuid} Completed 0->4 migrated to instance=4", rows
    event = output_of(commands, outputs, "kubectl get events -n fleet-demo --field-selector reason=MigrationCompleted")
    assert re.fullmatch(
        rf"OMENative migration uuid={uuid} complete: component=engine instance=0 -> instance=4 "
        r"\(revision=qwen3-0-6b-engine-rev-[0-9a-f]+\)\n",
        event,
    ), event
    audit = json.loads(output_of(commands, outputs, "kubectl get configmap qwen3-0-6b-ome-migration-audit"))
    assert [(row["uuid"], row["phase"], row["requested_by"]) for row in audit] == [(uuid, "Completed", "walkthrough")]

    cordoned = output_of(commands, outputs, "kubectl get node $NODE -o jsonpath='{.spec.unschedulable}")
    assert cordoned.strip() == "true", cordoned
    drained = output_of(commands, outputs, "temporal workflow query --workflow-id drain/node/")
    assert "Drained" in drained or "Migrating" in drained, drained
    released = output_of(commands, outputs, "temporal workflow result --workflow-id drain/node/")
    assert "Released" in released, released
    uncordoned = output_of(commands, outputs, "kubectl get node $NODE -o jsonpath='unschedulable=")
    assert uncordoned.strip() == "unschedulable=", uncordoned
