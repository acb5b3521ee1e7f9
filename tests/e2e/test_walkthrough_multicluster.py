"""The README's "Walkthrough: one InferenceService across two workload clusters", command by
command, exactly as written, on a stack started as the README says
(`OME_STACK__WORKLOAD_CLUSTERS=2 make up`): a control plane and two workload clusters, each
a kubesim serving HTTPS with its own CA and bearer token, driven with the `temporal` CLI and
kubectl. The outputs are then checked for what the README says they show.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.running_stack import RunningStack, stack_running
from tests.e2e.test_walkthrough import README, output_of, run_walkthrough, walkthrough_commands

HEADING = "Walkthrough: one InferenceService across two workload clusters"


@pytest.fixture(scope="module")
def multicluster_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    root = tmp_path_factory.mktemp("multicluster-stack")
    with stack_running(root, {"OME_STACK__WORKLOAD_CLUSTERS": "2"}) as running:
        yield running


def rows(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines() if line.strip()]


@pytest.mark.timeout(420)
def test_readme_multicluster_walkthrough_runs_as_written(multicluster_stack: RunningStack, tmp_path: Path) -> None:
    commands = walkthrough_commands(README.read_text(), HEADING)
    assert len(commands) >= 30, f"the walkthrough lost its commands: {commands}"
    outputs, stderr = run_walkthrough(multicluster_stack, tmp_path, commands)

    clusters = output_of(commands, outputs, "kubectl get workloadclusters")
    assert re.search(r"worker-a\s+True", clusters) and re.search(r"worker-b\s+True", clusters), clusters

    applied = output_of(commands, outputs, "temporal workflow execute-update-with-start")
    assert "UpdateResult  map[accepted:true changed:true generation:1 superseded:false warnings:[]]" in applied, applied
    placement = output_of(commands, outputs, "kubectl get inferenceservice chat -n prod -o jsonpath='{.status.placement")
    assert placement.split() == ["Placed", "worker-a=Admitted", "worker-b=Admitted"], placement

    member = output_of(commands, outputs, "kubectl --kubeconfig $A get inferenceservice,pods")
    assert re.search(r"inferenceservice.ome.io/chat\s+True", member), member
    assert len(re.findall(r"pod/chat-engine-\S+\s+1/1\s+Running", member)) == 2, member

    listed = output_of(commands, outputs, "temporal workflow list")
    for workflow_id in ("isvc/prod/chat", "isvc/prod/chat@worker-a", "isvc/prod/chat@worker-b", "trafficmap/prod/chat"):
        assert re.search(rf"Running\s+{re.escape(workflow_id)}\s", listed), listed
    tm = output_of(commands, outputs, "kubectl get trafficmap chat -n prod")
    assert re.search(r"chat\s+All\s+True\s+True\s+False\s+Routable", tm), tm

    # Spec 000's Step 2, word for word.
    table = output_of(commands, outputs, "kubectl get trafficmap chat -n prod \\\n  -o jsonpath='{range .spec.entries[*]}{.cluster}{\" allocated")
    assert rows(table) == [
        "worker-a allocated=4 ready=4 factor= weight=2",
        "worker-b allocated=2 ready=2 factor=3 weight=3",
    ], table
    generation = output_of(commands, outputs, "kubectl get inferenceservice chat -n prod -o jsonpath='{.metadata.generation}")
    observed = output_of(commands, outputs, "kubectl get trafficmap chat -n prod -o jsonpath='{.spec.observedISVCGeneration}")
    assert generation.strip() == observed.strip() == "2", (generation, observed)

    route = rows(output_of(commands, outputs, "kubectl get httproute chat-global"))
    assert route[0] == "chat.prod.global.example.com", route
    assert sorted(int(line.rsplit("=", 1)[1]) for line in route[1:]) == [2, 3], route
    assert all(line.startswith("tmb-") for line in route[1:]), route

    gated = rows(output_of(commands, outputs, "kubectl get trafficmap chat -n prod \\\n  -o jsonpath='{range .spec.entries[*]}{.cluster}{\" weight=\"}{.weight}{\" healthy"))
    assert gated[0].startswith("worker-a weight=1 healthy=true") and gated[1:] == [
        "worker-b weight=0 healthy=false probe=HTTP 503"
    ], gated

    drained = output_of(commands, outputs, "temporal workflow update execute --workflow-id trafficmap/prod/chat --name drain_cluster")
    assert "overrides:0 -> 1" in drained, drained
    drain_table = rows(output_of(commands, outputs, "kubectl get trafficmap chat -n prod \\\n  -o jsonpath='{range .spec.entries[*]}{.cluster}{\" weight=\"}{.weight}{\" drainRefs"))
    assert drain_table == ['worker-a weight=2 drainRefs=', 'worker-b weight=0 drainRefs=["upgrade-42"]'], drain_table
    assert "traffic drain refused: override ID already exists" in stderr, stderr[-2000:]
    undrained = output_of(commands, outputs, "temporal workflow update execute --workflow-id trafficmap/prod/chat --name undrain_cluster")
    assert "overrides:1 -> 0" in undrained, undrained

    imported = output_of(commands, outputs, "kubectl get inferencepoolimport chat")
    assert imported.strip() == "worker-a worker-b Accepted=True", imported
    exported = output_of(commands, outputs, "kubectl --kubeconfig $A get inferencepool chat")
    assert exported.strip() == "Exported=True", exported

    gone = output_of(commands, outputs, "kubectl get trafficmap,httproute,inferenceservice -n prod")
    assert gone == "" and stderr.rstrip().endswith("No resources found in prod namespace."), stderr[-2000:]
    ended = multicluster_stack.temporal("workflow", "list", "--query", 'WorkflowId STARTS_WITH "isvc/prod/chat"').stdout
    assert ended.count("Completed") == 3 and "Running" not in ended, ended
