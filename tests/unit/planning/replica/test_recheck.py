"""`planning.replica.recheck`: which resting Instances the component re-list sends a fresh
summary to, and `planning.pod_summary.component_pods`/`pods_digest`, what that re-list
reduces pods to and compares with each Instance's last report."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from models.instance import InstanceOperation, InstancePhase, InstanceStatus
from models.kube_ops import ComponentPods
from planning.instance.resting import rests_on_parent_net
from planning.pod_summary import component_pods, pods_digest, summarize_pod
from planning.replica.recheck import NO_PODS_DIGEST, disagrees, relist_batch, stale_views
from tests.unit.planning.test_pod_summary import cond, pod

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
P0 = "chat-engine-0-default-0"
P1 = "chat-engine-0-default-1"
OPERATION = InstanceOperation(id="update-2", type="Update", step="Surge", started_at=NOW)
SERVING = [cond("ContainersReady", "True"), cond("Ready", "True"), cond("ome.io/serving", "True")]


def running(restarts: int = 0) -> list[dict[str, Any]]:
    return [{"name": "engine", "ready": True, "restartCount": restarts, "state": {"running": {}}}]


def serving_pod(name: str = P0, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return pod(name, index="0", conditions=SERVING, containers=running(restarts), **extra)


def digest(*pods: dict[str, Any]) -> str:
    return pods_digest(summarize_pod(obj, None) for obj in pods)


def report(index: int = 0, seen: str | None = None, **fields: Any) -> InstanceStatus:
    """A Ready Instance's last report, having seen one serving pod (`seen`: its digest)."""
    values: dict[str, Any] = {
        "namespace": "team-a",
        "isvc": "chat",
        "component": "engine",
        "index": index,
        "phase": InstancePhase.READY,
        "incarnation": 1,
        "target_revision": "7c9e",
        "desired_pods": 1,
        "total_pods": 1,
        "ready_pods": 1,
        "serving_pods": 1,
        "pod_names": [P0],
        "pods_digest": digest(serving_pod()) if seen is None else seen,
    }
    values.update(fields)
    return InstanceStatus(**values)


def node_not_ready() -> dict[str, Any]:
    """The node went NotReady: the kubelet's Ready condition flips, ContainersReady stays True."""
    obj = serving_pod()
    obj["status"]["conditions"] = [cond("ContainersReady", "True"), cond("Ready", "False"), cond("ome.io/serving", "True")]
    return obj


def replaced() -> dict[str, Any]:
    """A pod of the same name, created again (a new uid)."""
    obj = copy.deepcopy(serving_pod())
    obj["metadata"]["uid"] = "uid-new"
    return obj


@pytest.mark.parametrize(
    ("reported", "fresh", "expected"),
    [
        pytest.param(report(), digest(serving_pod()), False, id="agrees"),
        pytest.param(report(), None, True, id="all pods gone"),
        pytest.param(report(), digest(serving_pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z")), True, id="pod being deleted"),
        pytest.param(report(), digest(serving_pod(restarts=1)), True, id="(a) restarted, Ready again by the re-list"),
        pytest.param(report(), digest(node_not_ready()), True, id="(b) node NotReady: Ready False, ContainersReady True"),
        pytest.param(report(), digest(replaced()), True, id="(c) same name, new uid"),
        pytest.param(report(), digest(serving_pod(), serving_pod(P1)), True, id="a stray pod"),
        pytest.param(report(seen=digest(serving_pod(), serving_pod(P1))), digest(serving_pod(P1), serving_pod()), False, id="two pods agree in any order"),
        pytest.param(report(seen=NO_PODS_DIGEST), None, False, id="no pods, as reported"),
        pytest.param(report(pods_digest=None), None, False, id="a report with no digest re-lists on its own"),
    ],
)  # fmt: skip
def test_disagrees(reported: InstanceStatus, fresh: str | None, expected: bool) -> None:
    assert disagrees(reported, fresh) is expected


SEEN = digest(serving_pod())
OTHER = digest(serving_pod(restarts=3))


@pytest.mark.parametrize(
    ("reports", "digests", "expected"),
    [
        pytest.param({0: report(0), 1: report(1)}, ((0, SEEN), (1, SEEN)), [], id="idle component"),
        pytest.param({0: report(0), 1: report(1)}, ((1, SEEN),), [0], id="one Instance lost its pod"),
        pytest.param({0: report(0), 1: report(1)}, ((0, SEEN), (1, OTHER)), [1], id="one Instance's pod restarted"),
        pytest.param({0: report(0, operation=OPERATION)}, (), [], id="an operation in flight re-lists on its own"),
        pytest.param({0: report(0, phase=InstancePhase.UPDATING)}, (), [], id="updating"),
        pytest.param({0: report(0, phase=InstancePhase.FAILED)}, (), [], id="failed keeps its own timer"),
        pytest.param({0: report(0, draining=True)}, (), [], id="draining"),
        pytest.param({0: report(0, deleted=True)}, (), [], id="deleted"),
        pytest.param({2: report(2), 0: report(0)}, (), [0, 2], id="in index order"),
    ],
)  # fmt: skip
def test_stale_views(reports: dict[int, InstanceStatus], digests: tuple[tuple[int, str], ...], expected: list[int]) -> None:
    assert stale_views(reports, ComponentPods(resource_version="9", digests=digests)) == expected


@pytest.mark.parametrize(
    ("stale", "after", "limit", "expected"),
    [
        pytest.param([1, 2, 3], -1, 100, [1, 2, 3], id="under the cap: all"),
        pytest.param(list(range(250)), -1, 100, list(range(100)), id="capped from the start"),
        pytest.param(list(range(250)), 99, 100, list(range(100, 200)), id="the next pass goes on"),
        pytest.param(list(range(250)), 199, 100, [*range(50), *range(200, 250)], id="and wraps around"),
    ],
)
def test_relist_batch_caps_the_fan_out_and_reaches_everyone(
    stale: list[int], after: int, limit: int, expected: list[int]
) -> None:
    assert relist_batch(stale, after, limit) == expected


@pytest.mark.parametrize(
    ("phase", "operation", "draining", "expected"),
    [
        (InstancePhase.READY, None, False, True),
        (InstancePhase.READY, OPERATION, False, False),
        (InstancePhase.READY, None, True, False),
        (InstancePhase.CREATING, None, False, False),
        (InstancePhase.PENDING, None, False, False),
        (InstancePhase.FAILED, None, False, False),
    ],
)
def test_only_a_resting_ready_instance_is_on_the_parent_net(
    phase: InstancePhase, operation: InstanceOperation | None, draining: bool, expected: bool
) -> None:
    assert rests_on_parent_net(phase, operation, draining) is expected


def test_component_pods_reduce_each_instance_to_its_digest() -> None:
    one = pod("chat-engine-1-default-0", index="1", conditions=SERVING, containers=running())
    zero = [serving_pod(), serving_pod(P1, metadata__deletionTimestamp="2026-01-01T00:00:00Z")]
    unrelated = {"metadata": {"name": "unrelated", "namespace": "team-a", "labels": {"app": "x"}}}
    found = component_pods([one, unrelated, *zero], "77")
    assert found.resource_version == "77"
    assert found.digests == ((0, digest(*zero)), (1, digest(one)))


def test_the_digests_of_2000_eight_pod_instances_fit_a_payload() -> None:
    pods = [
        pod(f"chat-engine-{index}-default-{ordinal}", index=str(index), conditions=SERVING, containers=running())
        for index in range(2000)
        for ordinal in range(8)
    ]
    payload = component_pods(pods, "1").model_dump_json()
    assert len(payload) < 200_000  # Temporal refuses payloads over 2 MB
