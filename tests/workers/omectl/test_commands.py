"""omectl's commands end to end through a real Temporal dev server, against stand-ins that answer
the product workflows' message names (tests/workers/test_controller_workflow.py's InferenceService,
standins.py's TrafficMap and Drain): the input each verb sends, what it prints, its exit code, and
that `--dry-run` sends nothing."""

from __future__ import annotations

import asyncio
import gc
import json
import shlex
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.worker import Worker

from tests.workers.omectl.cli import Omectl, omectl_runner
from tests.workers.omectl.standins import StandInDrain, StandInInferenceReplica, StandInTrafficMap
from tests.workers.test_controller_workflow import REFUSED_REVISION, FakeInferenceService
from workers.omectl import session

NAMESPACE = "omectl-plumbing"


@pytest_asyncio.fixture(loop_scope="session")
async def standins(dev_client: Client, task_queue: str) -> AsyncIterator[None]:
    async with Worker(
        dev_client, task_queue=task_queue, workflows=[FakeInferenceService, StandInTrafficMap, StandInDrain, StandInInferenceReplica]
    ):
        yield


@pytest.fixture
def omectl(monkeypatch: pytest.MonkeyPatch, dev_client: Client, task_queue: str) -> Omectl:
    return omectl_runner(monkeypatch, dev_client, task_queue)


async def calls(client: Client, workflow_id: str) -> list[dict[str, Any]]:
    return await client.get_workflow_handle(workflow_id).query("calls")


async def start_isvc(client: Client, task_queue: str, name: str) -> str:
    workflow_id = f"isvc/{NAMESPACE}/{name}"
    await client.start_workflow("InferenceService", {"manifest": {}}, id=workflow_id, task_queue=task_queue)
    return workflow_id


async def test_update_verbs_print_the_answer_and_the_temporal_line(
    standins: None, omectl: Omectl, dev_client: Client, task_queue: str
) -> None:
    name = f"svc-{uuid4().hex[:6]}"
    workflow_id = await start_isvc(dev_client, task_queue, name)

    done = await omectl("promote", name, "-n", NAMESPACE, "--override-analysis")
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "promote accepted"
    line = done.stderr.strip().removeprefix("temporal: ")
    assert shlex.split(line) == [
        "temporal", "workflow", "update", "execute", "--workflow-id", workflow_id, "--name", "promote",
        "--input", '{"override_analysis": true}', "--address", dev_client.service_client.config.target_host,
    ]

    refused = await omectl("retry", name, REFUSED_REVISION, "-n", NAMESPACE)
    assert refused.exit_code == 1
    assert refused.stderr.strip().endswith(f"action refused: canary revision {REFUSED_REVISION} is not the active canary")

    migrated = await omectl("migrate", name, "engine", "1", "--from-node", "gpu-node-2", "--uuid", "u-1", "-n", NAMESPACE)
    assert migrated.exit_code == 0, migrated.output
    assert json.loads(migrated.stdout) == {"uuid": "u-1", "workflow_id": "migration/x"}
    bad = await omectl("migrate", name, "bogus", "0", "--from-node", "n", "-n", NAMESPACE)
    assert bad.exit_code == 1
    assert "migration request: component 'bogus' is not a component" in bad.stderr
    conflict = await omectl("migrate", name, "router", "0", "--from-node", "n", "-n", NAMESPACE)
    assert conflict.exit_code == 3, conflict.output
    assert conflict.stderr.splitlines()[-2:] == [
        "migration request: component 'router' is RawDeployment; only OMENative components have Instances to migrate "
        "(components: engine=OMENative, router=RawDeployment)",
        "migration precondition conflicts or is stale; inspect migration status and retry explicitly",
    ]

    assert [(c["name"], c["input"]) for c in await calls(dev_client, workflow_id)] == [
        ("promote", {"override_analysis": True}),
        ("retry", {"revision": REFUSED_REVISION}),
        ("migrate", {"component": "engine", "instance": 1, "from_node": "gpu-node-2", "requested_by": "omectl", "uuid": "u-1"}),
        ("migrate", {"component": "bogus", "instance": 0, "from_node": "n", "requested_by": "omectl"}),
        ("migrate", {"component": "router", "instance": 0, "from_node": "n", "requested_by": "omectl"}),
    ]
    await dev_client.get_workflow_handle(workflow_id).signal("delete")


async def test_signal_verbs_send_the_readmes_inputs(standins: None, omectl: Omectl, dev_client: Client, task_queue: str) -> None:
    name = f"svc-{uuid4().hex[:6]}"
    workflow_id = await start_isvc(dev_client, task_queue, name)
    held = f"{name}-engine-5d9c7b8f"
    replica = await dev_client.start_workflow(
        "InferenceReplica",
        {"retryBlocks": [{"targetRevision": held, "state": "Held"}, {"targetRevision": "r-engine-0badcafe", "state": "Backoff"}]},
        id=f"irep/{NAMESPACE}/{name}-engine",
        task_queue=task_queue,
    )
    for args in (
        ("pause", name, "--freeze"),
        ("resume", name),
        ("release-held", name, "engine", "5d9c7b8f"),
        ("reset", name, "decoder", "--instances", "0,2"),
    ):
        sent = await omectl(*args, "-n", NAMESPACE)
        assert sent.exit_code == 0, sent.output
        assert sent.stdout.startswith(f"signal {args[0].replace('-', '_').replace('reset', 'reset_instances')} sent to {workflow_id}")
    assert [(c["name"], c["input"]) for c in await calls(dev_client, workflow_id)] == [
        ("pause", "freeze"),
        ("resume", None),
        ("release_held", {"component": "engine", "revision": "5d9c7b8f"}),
        ("reset_instances", {"component": "decoder", "instances": "0,2"}),
    ]
    await replica.signal("delete")
    await dev_client.get_workflow_handle(workflow_id).signal("delete")


async def test_signal_verbs_read_first_and_refuse_sending_nothing(
    standins: None, omectl: Omectl, dev_client: Client, task_queue: str
) -> None:
    """A signal has no answer: what the workflow would refuse is refused before sending (§3.3)."""
    name = f"svc-{uuid4().hex[:6]}"
    workflow_id = await start_isvc(dev_client, task_queue, name)
    replica = await dev_client.start_workflow(
        "InferenceReplica",
        {"retryBlocks": [{"targetRevision": f"{name}-engine-0badcafe", "state": "Backoff"}]},
        id=f"irep/{NAMESPACE}/{name}-engine",
        task_queue=task_queue,
    )
    not_paused = await omectl("resume", name, "-n", NAMESPACE)
    assert (not_paused.exit_code, not_paused.stderr.strip()) == (1, "action refused: service has no recognized pause")
    assert (await omectl("pause", name, "-n", NAMESPACE)).exit_code == 0
    for args in (("pause", name), ("pause", name, "--freeze")):
        assert (await omectl(*args, "-n", NAMESPACE)).exit_code == (1 if len(args) == 2 else 0)
    frozen = await omectl("pause", name, "-n", NAMESPACE)
    assert (frozen.exit_code, frozen.stderr.strip()) == (1, "action refused: service is already paused; freeze is preserved")
    for revision in ("rev-1", "0badcafe", f"{name}-engine-0badcafe"):  # no block; a block not Held
        refused = await omectl("release-held", name, "engine", revision, "-n", NAMESPACE)
        assert refused.exit_code == 1
        assert refused.stderr.strip() == "action refused: no exact current valid Held retry block is releasable"
    no_replica = await omectl("release-held", name, "decoder", "rev-1", "-n", NAMESPACE)
    assert no_replica.exit_code == 1 and f"no workflow irep/{NAMESPACE}/{name}-decoder" in no_replica.stderr
    assert [(c["name"], c["input"]) for c in await calls(dev_client, workflow_id)] == [("pause", None), ("pause", "freeze")]
    await replica.signal("delete")
    await dev_client.get_workflow_handle(workflow_id).signal("delete")


async def test_dry_run_sends_nothing(standins: None, omectl: Omectl, dev_client: Client, task_queue: str) -> None:
    name = f"svc-{uuid4().hex[:6]}"
    workflow_id = await start_isvc(dev_client, task_queue, name)
    shown = await omectl("rollback", name, "-n", NAMESPACE, "--dry-run")
    assert shown.exit_code == 0
    assert shown.stdout.splitlines()[:4] == ["dry run: nothing sent", f"workflow: {workflow_id}", "update: rollback", "input: none"]
    assert shown.stdout.splitlines()[4].startswith(f"temporal: temporal workflow update execute --workflow-id {workflow_id} --name rollback")
    assert await calls(dev_client, workflow_id) == []
    await dev_client.get_workflow_handle(workflow_id).signal("delete")


async def test_a_verb_for_a_missing_workflow_exits_1(standins: None, omectl: Omectl) -> None:
    missing = await omectl("reset", "nothing-here", "engine", "-n", NAMESPACE)
    assert missing.exit_code == 1
    assert f"no running workflow isvc/{NAMESPACE}/nothing-here" in missing.stderr
    unread = await omectl("resume", "nothing-here", "-n", NAMESPACE)
    assert unread.exit_code == 1
    assert f"no workflow isvc/{NAMESPACE}/nothing-here" in unread.stderr


async def test_drain_node_starts_once_then_conflicts_and_undrain_releases(
    standins: None, omectl: Omectl, dev_client: Client
) -> None:
    node = f"node-{uuid4().hex[:6]}"
    started = await omectl("drain", "node", node, "--reason", "kernel upgrade", "--timeout", "2h")
    assert started.exit_code == 0, started.output
    assert started.stdout.strip() == f"started Drain drain/node/{node}"
    handle = dev_client.get_workflow_handle(f"drain/node/{node}")
    assert await handle.query("input") == {"node": node, "reason": "kernel upgrade", "timeout": "2h"}

    again = await omectl("drain", "node", node)
    assert again.exit_code == 3
    assert f"drain/node/{node} is already running" in again.stderr

    released = await omectl("undrain", "node", node)
    assert released.exit_code == 0, released.output
    assert await handle.result() == "Released"


def trafficmap_view(name: str) -> dict[str, Any]:
    return {
        "namespace": NAMESPACE,
        "isvc": name,
        "mode": "All",
        "map_generation": 2,
        "entries": [
            {"cluster": "worker-a", "weight": 2, "healthy": True},
            {"cluster": "worker-b", "weight": 3, "healthy": True},
        ],
        "conditions": [
            {"type": "Routable", "status": "True", "reason": "Routable", "observedGeneration": 2},
            {"type": "Published", "status": "True", "reason": "Published", "observedGeneration": 1},
        ],
    }


async def test_trafficmap_get_and_cluster_drain(standins: None, omectl: Omectl, dev_client: Client, task_queue: str) -> None:
    name = f"chat-{uuid4().hex[:6]}"
    workflow_id = f"trafficmap/{NAMESPACE}/{name}"
    handle = await dev_client.start_workflow("TrafficMap", trafficmap_view(name), id=workflow_id, task_queue=task_queue)

    shown = await omectl("get", "tm", name, "-n", NAMESPACE)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["NAME", "MODE", "TARGETS", "ROUTABLE", "PUBLISHED"]
    assert lines[1].split() == [name, "All", "2", "True", "Unknown"]  # Published is of generation 1
    assert [line.split() for line in lines[3:]] == [
        ["CLUSTER", "WEIGHT", "HEALTHY", "DRAINS", "PROBE"], ["worker-a", "2", "true", "-", "-"], ["worker-b", "3", "true", "-", "-"],
    ]
    as_json = await omectl("get", "trafficmap", name, "-n", NAMESPACE, "-o", "json")
    assert json.loads(as_json.stdout)[0]["weights"] == {}

    drained = await omectl("drain", "cluster", name, "--workload-cluster", "worker-b", "--id", "upgrade-42", "-n", NAMESPACE)
    assert drained.exit_code == 0, drained.output
    assert drained.stdout.strip() == "override-id=upgrade-42 cluster=worker-b overrides=0 -> 1"
    again = await omectl("drain", "cluster", name, "--workload-cluster", "worker-b", "--id", "upgrade-42", "-n", NAMESPACE)
    assert again.exit_code == 1
    assert again.stderr.strip().endswith("traffic drain refused: override ID already exists")
    await handle.signal("delete")


async def test_get_of_a_missing_workflow_exits_1(standins: None, omectl: Omectl) -> None:
    missing = await omectl("get", "isvc", "nothing-here", "-n", NAMESPACE)
    assert missing.exit_code == 1
    assert f"no workflow isvc/{NAMESPACE}/nothing-here" in missing.stderr


async def test_unknown_kind_is_a_usage_error(omectl: Omectl) -> None:
    wrong = await omectl("get", "pods")
    assert wrong.exit_code == 2
    flat = " ".join(wrong.output.replace("│", " ").split())
    assert "KIND must be one of isvc, irep, instances, retry-blocks, migrations, trafficmap, got 'pods'" in flat


async def test_every_command_has_help_with_an_example(omectl: Omectl) -> None:
    commands = [
        ["apply"], ["get"], ["promote"], ["rollback"], ["retry"], ["repin"], ["pause"], ["resume"], ["release-held"],
        ["reset"], ["migrate"], ["drain", "node"], ["drain", "cluster"], ["undrain", "node"], ["undrain", "cluster"],
    ]
    for command in commands:
        shown = await omectl(*command, "--help")
        assert shown.exit_code == 0, command
        assert "Example" in shown.stdout and f"omectl {' '.join(command)}" in shown.stdout, command


async def test_sends_and_apply_are_bounded_when_no_worker_polls(
    monkeypatch: pytest.MonkeyPatch, dev_client: Client, tmp_path: Path
) -> None:
    """The SDK repeats an Update until a worker accepts it: the budget (§3.3's 45 s, here 1 s)
    ends the command with an unknown outcome naming the workflow, exit 1."""
    unpolled = f"unpolled-{uuid4().hex[:6]}"
    omectl = omectl_runner(monkeypatch, dev_client, unpolled)
    monkeypatch.setattr(session, "BUDGET_SECONDS", 1.0)
    name = f"svc-{uuid4().hex[:6]}"
    workflow_id = await start_isvc(dev_client, unpolled, name)

    began = time.monotonic()
    promote = await omectl("promote", name, "-n", NAMESPACE)
    assert promote.exit_code == 1, promote.output
    assert promote.stderr.splitlines()[-1] == (
        f"promote request outcome unknown after 1s (update promote to {workflow_id}); "
        f"do not replay, check omectl rollout status {name} -n {NAMESPACE}"
    )
    assert time.monotonic() - began < 15

    manifest = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": {"name": name, "namespace": NAMESPACE}}
    path = tmp_path / "isvc.yaml"
    path.write_text(json.dumps(manifest))
    applied = await omectl("apply", "-f", str(path))
    assert applied.exit_code == 1, applied.output
    assert applied.stderr.splitlines()[-1] == (
        f"apply request outcome unknown after 1s (Update apply to {workflow_id}); "
        f"do not replay, check omectl rollout status {name} -n {NAMESPACE}"
    )
    assert time.monotonic() - began < 30
    await dev_client.get_workflow_handle(workflow_id).terminate()
    # The with-start operation's handle future keeps the cancelled call's error unretrieved:
    # collect it now, while nothing parses source; collected later its finalizer's log parses
    # source inside pytest's own `ast.parse` (3.11.7: "AST constructor recursion depth mismatch").
    del applied, promote
    await asyncio.sleep(0.5)
    gc.collect()
