"""`omectl rollout status NAME --watch` on the running stack, captured mid-update: a service's
engine changes image and the watch, piped, prints a frame per change until every Instance
serves the new revision (issue 16, "Must show": the tree shows Instances moving)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.running_stack import REPO_ROOT, RunningStack
from workers.omectl.rollout_watch import FRAME_MARK

pytestmark = pytest.mark.e2e

NAMESPACE, NAME = "watch-demo", "qwen3-0-6b"
EXAMPLES = REPO_ROOT / "deploy" / "examples"
INSTANCE = re.compile(r"#(\d+)\s+(\w+)\s+(\S+)(?: -> (\S+))?")


def omectl(*args: str) -> list[str]:
    """The `omectl` console script once `workers.omectl.app` mounts the rollout commands; until
    then the same Typer app run directly (what `omectl rollout` runs)."""
    if importlib.util.find_spec("workers.omectl.app") is not None:
        return [str(Path(sys.prefix) / "bin" / "omectl"), "rollout", *args]
    return [sys.executable, "-c", "from workers.omectl.rollout import app; app()", *args]


def manifest(tmp_path: Path, example: str) -> Path:
    loaded: dict[str, Any] = json.loads((EXAMPLES / example).read_text())
    loaded["metadata"]["namespace"] = NAMESPACE
    written = tmp_path / example
    written.write_text(json.dumps(loaded))
    return written


def apply(stack: RunningStack, path: Path) -> None:
    stack.temporal(
        "workflow", "execute-update-with-start", "--update-name", "apply", "--update-input-file", str(path),
        "--type", "InferenceService", "--task-queue", "ome-lifecycle", "--workflow-id", f"isvc/{NAMESPACE}/{NAME}",
        "--id-conflict-policy", "UseExisting", "--input-file", str(path),
    )


def kubectl(stack: RunningStack, *args: str) -> None:
    subprocess.run(["kubectl", "--kubeconfig", str(stack.kubeconfig), *args], check=True, capture_output=True, timeout=60)


def engine_lifecycle(stack: RunningStack) -> dict[str, Any]:
    answer = stack.temporal_json("workflow", "query", "--workflow-id", f"isvc/{NAMESPACE}/{NAME}", "--name", "status")
    components = answer["queryResult"][0]["status"].get("components") or {}
    found: dict[str, Any] = (components.get("engine") or {}).get("lifecycle") or {}
    return found


def until(probe: Any, what: str, within: float) -> Any:
    deadline = time.monotonic() + within
    while not (found := probe()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what}")
        time.sleep(0.3)
    return found


def instances(frame: str) -> list[tuple[str, str, str | None]]:
    """(phase, running revision, revision moved to) of each Instance line of a frame."""
    return [(m[2], m[3], m[4]) for m in INSTANCE.finditer(frame)]


@pytest.mark.timeout(240)
def test_watch_shows_the_instances_moving_to_the_new_revision(stack: RunningStack, tmp_path: Path) -> None:
    kubectl(stack, "apply", "-f", str(EXAMPLES / "srt-qwen3-0-6b.yaml"))
    kubectl(stack, "create", "namespace", NAMESPACE)
    apply(stack, manifest(tmp_path, "qwen3-0-6b.json"))
    until(lambda: engine_lifecycle(stack).get("readyReplicas") == 2, "two engine Instances ready", within=120)
    before = engine_lifecycle(stack)["currentRevision"]

    began = time.monotonic()
    apply(stack, manifest(tmp_path, "qwen3-0-6b-new-image.json"))
    until(lambda: engine_lifecycle(stack).get("updateRevision") != before, "the update begun", within=30)
    env = {**os.environ, "OME_TEMPORAL__ADDRESS": stack.address, "PYTHONPATH": str(REPO_ROOT)}
    watched = subprocess.run(
        omectl("status", NAME, "-n", NAMESPACE, "--watch", "--until-done"),
        capture_output=True, text=True, timeout=90, cwd=REPO_ROOT, env=env,
    )
    took = time.monotonic() - began
    print(f"the update and its watch took {took:.1f} s; the watch printed:\n{watched.stdout}")
    assert watched.returncode == 0, f"exit {watched.returncode}\n{watched.stdout}\n{watched.stderr}"

    frames = [frame for frame in watched.stdout.split(FRAME_MARK)[1:] if instances(frame)]
    after = engine_lifecycle(stack)["currentRevision"]
    new_hash = after.rsplit("-rev-", 1)[-1]
    assert after != before and len(frames) >= 2, watched.stdout
    revisions = [tuple(running for _, running, _ in instances(frame)) for frame in frames]
    assert len(set(revisions)) >= 2, f"the Instances never moved across frames:\n{watched.stdout}"
    assert any(moving is not None for frame in frames for _, _, moving in instances(frame)), watched.stdout
    last = instances(frames[-1])
    assert len(last) == 2 and all(phase == "Ready" and running == new_hash and moving is None for phase, running, moving in last)
    assert f"update {after}" in frames[-1] and f"current {after}" in frames[-1]
    assert took < 45, f"the update and its watch took {took:.0f} s"
