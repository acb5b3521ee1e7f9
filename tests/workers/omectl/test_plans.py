"""What each action verb sends (workflow, message, JSON input) and the `temporal` line printed
beside it: the README's `temporal` commands, word for word."""

from __future__ import annotations

import shlex

import pytest

from workers.omectl import plans
from workers.omectl.plans import Send, temporal_command

CASES = [
    (plans.promote("canary-demo", "mistral-pd"), "temporal workflow update execute --workflow-id isvc/canary-demo/mistral-pd --name promote"),
    (
        plans.promote("d", "x", override_analysis=True),
        """temporal workflow update execute --workflow-id isvc/d/x --name promote --input '{"override_analysis": true}'""",
    ),
    (plans.rollback("d", "x"), "temporal workflow update execute --workflow-id isvc/d/x --name rollback"),
    (
        plans.retry("d", "x", "engine=abc"),
        """temporal workflow update execute --workflow-id isvc/d/x --name retry --input '{"revision": "engine=abc"}'""",
    ),
    (plans.repin("d", "x"), """temporal workflow update execute --workflow-id isvc/d/x --name repin --input '{"digest": "now"}'"""),
    (plans.pause("d", "x"), "temporal workflow signal --workflow-id isvc/d/x --name pause"),
    (plans.pause("d", "x", freeze=True), """temporal workflow signal --workflow-id isvc/d/x --name pause --input '"freeze"'"""),
    (
        plans.pause("d", "x", discard_pending_actions=True),
        """temporal workflow signal --workflow-id isvc/d/x --name pause --input '{"mode": "true", "discard_pending_actions": true}'""",
    ),
    (plans.resume("d", "x"), "temporal workflow signal --workflow-id isvc/d/x --name resume"),
    (
        plans.release_held("d", "x", "engine", "rev-1"),
        """temporal workflow signal --workflow-id isvc/d/x --name release_held --input '{"component": "engine", "revision": "rev-1"}'""",
    ),
    (
        plans.reset("d", "x", "engine", "0,2"),
        """temporal workflow signal --workflow-id isvc/d/x --name reset_instances --input '{"component": "engine", "instances": "0,2"}'""",
    ),
    (
        plans.migrate("d", "x", "engine", 0, "n1", "ECC errors", uuid="u-1"),
        "temporal workflow update execute --workflow-id isvc/d/x --name migrate --input "
        """'{"component": "engine", "instance": 0, "from_node": "n1", "reason": "ECC errors", "requested_by": "omectl", "uuid": "u-1"}'""",
    ),
    (
        plans.drain_node("gpu-node-1", "kernel upgrade", "2h"),
        "temporal workflow start --type Drain --task-queue ome-lifecycle --workflow-id drain/node/gpu-node-1 "
        """--input '{"node": "gpu-node-1", "reason": "kernel upgrade", "timeout": "2h"}'""",
    ),
    (plans.undrain_node("gpu-node-1"), "temporal workflow signal --workflow-id drain/node/gpu-node-1 --name release"),
    (plans.undrain_node("gpu-node-1", cancel=True), "temporal workflow signal --workflow-id drain/node/gpu-node-1 --name cancel"),
    (
        plans.drain_cluster("prod", "chat", "worker-b", "upgrade-42", "node pool upgrade"),
        "temporal workflow update execute --workflow-id trafficmap/prod/chat --name drain_cluster "
        """--input '{"id": "upgrade-42", "cluster": "worker-b", "reason": "node pool upgrade"}'""",
    ),
    (
        plans.undrain_cluster("prod", "chat", "upgrade-42"),
        """temporal workflow update execute --workflow-id trafficmap/prod/chat --name undrain_cluster --input '{"id": "upgrade-42"}'""",
    ),
]


@pytest.mark.parametrize(("send", "command"), CASES, ids=[f"{send.name}-{i}" for i, (send, _) in enumerate(CASES)])
def test_temporal_line(send: Send, command: str) -> None:
    assert temporal_command(send) == command
    assert shlex.split(command)[0] == "temporal"


def test_non_default_address_and_namespace_are_spelled_out() -> None:
    line = temporal_command(plans.resume("d", "x"), "temporal.example:7233", "prod-ns")
    assert line.endswith("--address temporal.example:7233 --namespace prod-ns")
    assert temporal_command(plans.resume("d", "x"), "127.0.0.1:7233", "default").endswith("--name resume")


def test_a_drain_starts_on_the_configured_task_queue() -> None:
    assert "--task-queue tq-1" in temporal_command(plans.drain_node("n", task_queue="tq-1"))


def test_describe() -> None:
    assert plans.promote("d", "x").describe() == "Update promote to isvc/d/x with no input"
