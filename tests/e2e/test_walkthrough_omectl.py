"""The README's "Operating it with `omectl`" section on the running stack, command by command,
exactly as written (issue 16): `apply --wait` progress to Ready, every `get` table, a refused
`promote` with its text and exit code, the dry runs, the signals, a node drained and released
through `omectl`, and `omectl rollout status --watch` following an update mid-way (the tree's
Instances move from frame to frame). Where `workers.omectl.rollout` is not installed (a branch
without it), the `omectl rollout` commands are left out and said so.

omectl reads `OME_TEMPORAL__ADDRESS` as the worker does (the `temporal` CLI reads
`TEMPORAL_ADDRESS`): the test's stack listens on a free port, so both are set from outside."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.running_stack import RunningStack
from tests.e2e.test_walkthrough import README, output_of, run_walkthrough, walkthrough_commands
from workers.omectl.rollout_watch import FRAME_MARK
from workflows.service.canary_requests import REFUSED_NO_RUN

HEADING = "Operating it with `omectl`"
NAME = "qwen3-omectl"
INSTANCE_LINE = re.compile(r"#(\d+)\s+(\w+)\s+(\S+)(?: -> (\S+))?")
"""An Instance of a `rollout status` frame: index, phase, running revision, revision moving to."""


@pytest.mark.timeout(300)
def test_readme_omectl_section_runs_as_written(stack: RunningStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OME_TEMPORAL__ADDRESS", stack.address)
    commands = walkthrough_commands(README.read_text(), heading=HEADING)
    assert len(commands) >= 30, f"the section lost its commands: {commands}"
    outputs, stderr = run_walkthrough(stack, tmp_path, commands)

    def out(starts_with: str, nth: int = 0) -> str:
        return output_of(commands, outputs, starts_with, nth)

    assert out("omectl apply -f deploy/examples/srt-qwen3-0-6b.yaml").strip() in (
        "clusterservingruntime.ome.io/srt-qwen3-0-6b created",
        "clusterservingruntime.ome.io/srt-qwen3-0-6b configured",
        "clusterservingruntime.ome.io/srt-qwen3-0-6b unchanged",
    )
    applied = out("omectl apply -f deploy/examples/omectl-demo.yaml").splitlines()
    assert applied[:3] == [
        "namespace/omectl-demo created",
        f"inferenceservice.ome.io/{NAME} accepted (generation 1, changed)",
        f"waiting for omectl-demo/{NAME} generation 1 to be Ready (timeout 180s)",
    ], applied
    progress = [line for line in applied if line.startswith("generation 1 (")]
    assert len(progress) >= 2, f"--wait showed no progress before Ready: {applied}"
    assert progress[-1] == "generation 1 (Ready): engine 2/2 serving", applied
    assert applied[-1] == f"omectl-demo/{NAME} is Ready"

    assert out("omectl get isvc -n omectl-demo").splitlines()[1].split()[:6] == [
        NAME, "Ready", "1", "True", "false", "engine=2/2",
    ]
    replicas = out("omectl get irep -n omectl-demo -o wide").splitlines()
    assert replicas[0].split()[:9] == ["NAME", "COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE", "PARENT", "LIFECYCLE", "AGE"]
    assert replicas[1].split()[:8] == [f"{NAME}-engine", "engine", "2", "2", "2", "2", NAME, "Ready=True"]
    instances = [line.split() for line in out("omectl get instances").splitlines()]
    assert instances[0] == ["COMP", "IDX/INC", "PHASE", "PODS", "REVS", "AOF", "EVIDENCE"]
    assert [(row[0], row[1], row[2], row[3], row[5], row[6]) for row in instances[1:]] == [
        ("engine", "0/1", "Ready", "1/1/1", "A--", "OK"),
        ("engine", "1/1", "Ready", "1/1/1", "A--", "OK"),
    ]
    assert out("omectl get retry-blocks").splitlines()[1].split() == ["-", "EMPTY", "-", "-", "-", "NO", "-"]
    assert out("omectl get trafficmap").split() == ["NAME", "MODE", "TARGETS", "ROUTABLE", "PUBLISHED"]

    # The refused promote: the reference's text on stderr, exit code 1
    assert out("omectl promote").strip() == "exit code 1"
    assert f"{REFUSED_NO_RUN}\n" in stderr
    assert f"temporal: temporal workflow update execute --workflow-id isvc/omectl-demo/{NAME} --name promote" in stderr
    rollback = out("omectl rollback").splitlines()
    assert rollback[:4] == ["dry run: nothing sent", f"workflow: isvc/omectl-demo/{NAME}", "update: rollback", "input: none"]
    assert '"revision": "engine=5d9c7b8f"' in out("omectl retry")
    assert '--name repin --input \'{"digest": "now"}\'' in out("omectl repin")

    assert out("omectl pause").strip() == f"signal pause sent to isvc/omectl-demo/{NAME}"
    assert out(f"omectl get isvc {NAME}").splitlines()[1].split()[4] == "true"
    assert out("omectl resume").strip() == f"signal resume sent to isvc/omectl-demo/{NAME}"
    # Nothing is held: refused before sending, with the reference's text (§11)
    assert out("omectl release-held").strip() == "exit code 1"
    assert "action refused: no exact current valid Held retry block is releasable\n" in stderr
    assert out("omectl reset").strip().startswith("signal reset_instances sent")

    assert "--name migrate --input" in out("omectl migrate")
    assert re.fullmatch(r"started Drain drain/node/\S+\n", out("omectl drain node")), out("omectl drain node")
    migrations = out("omectl get migrations").splitlines()
    assert migrations[0].split() == ["SUBJECT/COMP", "STATUS", "DETAIL"]
    # The source pod is gone: the migration has completed, or is recording its last phase.
    moved = r"\S+/engine\s+(Completed/Terminal|Draining/Active)/Current\s+instance=1->\d+"
    assert any(re.match(moved, row) for row in migrations[1:]), migrations
    assert out("omectl undrain node").startswith("signal release sent to drain/node/")
    assert "--name drain_cluster" in out("omectl drain cluster")

    # The rollout: the new image is accepted, and the watch saw the Instances move
    assert out("omectl apply -f deploy/examples/omectl-demo-new-image.yaml").strip() == (
        f"inferenceservice.ome.io/{NAME} accepted (generation 2, changed)"
    )
    watched = out("omectl rollout status qwen3-omectl -n omectl-demo --watch")
    frames = [frame for frame in watched.split(FRAME_MARK)[1:] if INSTANCE_LINE.search(frame)]
    revisions = {tuple(match[3] for match in INSTANCE_LINE.finditer(frame)) for frame in frames}
    assert len(frames) >= 2 and len(revisions) >= 2, f"the watch saw no Instance move:\n{watched}"
    assert any(match[4] for frame in frames for match in INSTANCE_LINE.finditer(frame)), watched
    last = list(INSTANCE_LINE.finditer(frames[-1]))
    assert last and all(m[2] == "Ready" and m[4] is None for m in last), f"the watch ended mid-change:\n{frames[-1]}"
    assert len({m[3] for m in last}) == 1 and revisions != {tuple(m[3] for m in last)}, watched
    assert "has had no rollout run" in out("omectl rollout history")
