"""A Deployment-mode component's `<Component>Ready` from its Deployment's status (reference §8)."""

from __future__ import annotations

from typing import Any

import pytest

from models.pods import LABEL_COMPONENT, LABEL_ISVC
from planning.service.deployment import (
    DeploymentObserved,
    converged,
    deployment_condition,
    deployment_minimum,
    newer,
    observe_deployment,
    resolve_budget,
    rolling_out,
)

pytestmark = pytest.mark.unit


def deployment(
    spec_replicas: int = 4,
    *,
    generation: int = 3,
    observed_generation: int = 3,
    replicas: int | None = None,
    ready: int | None = None,
    available: int | None = None,
    updated: int | None = None,
    strategy: dict[str, Any] | None = None,
    version: str = "100",
    component: str = "engine",
) -> dict[str, Any]:
    """A Deployment object as the API server returns it; counts default to 'all done'."""
    spec: dict[str, Any] = {"replicas": spec_replicas}
    if strategy is not None:
        spec["strategy"] = strategy
    return {
        "metadata": {
            "name": f"chat-{component}",
            "namespace": "ns",
            "labels": {LABEL_ISVC: "chat", LABEL_COMPONENT: component},
            "generation": generation,
            "resourceVersion": version,
        },
        "spec": spec,
        "status": {
            "observedGeneration": observed_generation,
            "replicas": spec_replicas if replicas is None else replicas,
            "readyReplicas": spec_replicas if ready is None else ready,
            "availableReplicas": spec_replicas if available is None else available,
            "updatedReplicas": spec_replicas if updated is None else updated,
        },
    }


def observed(**kwargs: Any) -> DeploymentObserved:
    found = observe_deployment(deployment(**kwargs))
    assert found is not None
    return found


def test_observe_reads_counts_strategy_and_identity() -> None:
    seen = observed(
        replicas=5, ready=3, available=2, updated=1, strategy={"rollingUpdate": {"maxUnavailable": 1}}
    )
    assert (seen.namespace, seen.isvc, seen.component) == ("ns", "chat", "engine")
    assert (seen.spec_replicas, seen.replicas, seen.ready_replicas) == (4, 5, 3)
    assert (seen.available_replicas, seen.updated_replicas) == (2, 1)
    assert (seen.strategy, seen.max_unavailable, seen.max_surge) == ("RollingUpdate", 1, None)
    assert (seen.generation, seen.observed_generation, seen.resource_version) == (3, 3, "100")


def test_observe_ignores_a_deployment_that_is_not_a_component() -> None:
    assert observe_deployment({"metadata": {"name": "other", "labels": {"app": "x"}}}) is None


def test_observe_of_a_fresh_deployment_has_zero_counts() -> None:
    fresh = {"metadata": {"labels": {LABEL_ISVC: "chat", LABEL_COMPONENT: "router"}, "generation": 1}}
    seen = observe_deployment(fresh)
    assert seen is not None and seen.spec_replicas == 1 and seen.replicas == 0 and not seen.current


@pytest.mark.parametrize(
    ("name", "desired", "strategy", "surge", "unavailable", "minimum"),
    [
        ("defaults 25% of 4 rounds down to 1", 4, "RollingUpdate", None, None, 3),
        ("defaults 25% of 2 rounds down to 0", 2, "RollingUpdate", None, None, 2),
        ("defaults 25% of 10 rounds down to 2", 10, "RollingUpdate", None, None, 8),
        ("integer maxUnavailable", 4, "RollingUpdate", None, 2, 2),
        ("percent maxUnavailable", 10, "RollingUpdate", None, "50%", 5),
        ("maxUnavailable above desired is capped", 3, "RollingUpdate", None, 7, 0),
        ("both budgets 0 makes maxUnavailable 1", 4, "RollingUpdate", 0, 0, 3),
        ("surge 0 with 25% of 2 (0) makes maxUnavailable 1", 2, "RollingUpdate", 0, None, 1),
        ("Recreate allows no unavailability", 4, "Recreate", None, None, 4),
        ("no desired pods, no minimum", 0, "RollingUpdate", None, None, 0),
        ("unreadable budget falls back to 25%", 8, "RollingUpdate", None, "lots", 6),
    ],
)
def test_deployment_minimum(
    name: str, desired: int, strategy: str, surge: Any, unavailable: Any, minimum: int
) -> None:
    assert deployment_minimum(desired, strategy, surge, unavailable) == minimum, name


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (None, 4, True, 1),
        (None, 4, False, 1),
        ("30%", 4, True, 2),
        ("30%", 4, False, 1),
        (2, 9, False, 2),
        ("3", 9, False, 3),
        (True, 4, False, 1),
    ],
)
def test_resolve_budget(value: Any, total: int, round_up: bool, expected: int) -> None:
    assert resolve_budget(value, total, round_up) == expected


COMPONENT_CASES = [
    # name, desired, deployment kwargs (None: never seen), status, reason, message
    ("no desired pods", 0, {}, "False", "NoReplicas", "Component has no desired Instances"),
    ("all updated and available", 4, {}, "True", "Ready", "All Instances are Ready"),
    ("never observed", 2, None, "False", "InsufficientAvailable", "0/2 Instances serving, need 2"),
    (
        "controller has not seen the new generation",
        4,
        {"observed_generation": 2},
        "True",
        "MinimumAvailable",
        "4/4 Instances serving (min 3)",
    ),
    (
        "rolling: old pods still serve, new ones not updated",
        4,
        {"updated": 2, "replicas": 5},
        "True",
        "MinimumAvailable",
        "4/4 Instances serving (min 3)",
    ),
    (
        "one of four unavailable",
        4,
        {"ready": 3, "available": 3},
        "True",
        "MinimumAvailable",
        "3/4 Instances serving (min 3)",
    ),
    (
        "two of four unavailable",
        4,
        {"ready": 2, "available": 2},
        "False",
        "InsufficientAvailable",
        "2/4 Instances serving, need 3",
    ),
    (
        "ready but not yet available (minReadySeconds)",
        2,
        {"ready": 2, "available": 1},
        "False",
        "InsufficientAvailable",
        "1/2 Instances serving, need 2",
    ),
    (
        "all pods unready",
        2,
        {"ready": 0, "available": 0},
        "False",
        "InsufficientAvailable",
        "0/2 Instances serving, need 2",
    ),
    (
        "surge pods counted up to desired only",
        2,
        {"replicas": 3, "available": 3},
        "True",
        "MinimumAvailable",
        "2/2 Instances serving (min 2)",
    ),
    (
        "scale-up in progress",
        4,
        {"spec_replicas": 2, "replicas": 2, "available": 2, "updated": 2},
        "False",
        "InsufficientAvailable",
        "2/4 Instances serving, need 3",
    ),
    (
        "Recreate with one pod down",
        3,
        {"available": 2, "strategy": {"type": "Recreate"}},
        "False",
        "InsufficientAvailable",
        "2/3 Instances serving, need 3",
    ),
    (
        "maxUnavailable 50% tolerates half",
        4,
        {"available": 2, "strategy": {"rollingUpdate": {"maxUnavailable": "50%"}}},
        "True",
        "MinimumAvailable",
        "2/4 Instances serving (min 2)",
    ),
]


@pytest.mark.parametrize(
    ("name", "desired", "kwargs", "status", "reason", "message"),
    COMPONENT_CASES,
    ids=[case[0] for case in COMPONENT_CASES],
)
def test_deployment_condition(
    name: str, desired: int, kwargs: dict[str, Any] | None, status: str, reason: str, message: str
) -> None:
    if kwargs is None:
        seen = None
    else:
        kwargs = dict(kwargs)
        spec_replicas = kwargs.pop("spec_replicas", desired)
        seen = observed(spec_replicas=spec_replicas, **kwargs)
    condition = deployment_condition("engine", desired, seen)
    assert condition.type == "EngineReady"
    assert (condition.status, condition.reason, condition.message) == (status, reason, message)


def test_condition_types_per_component() -> None:
    assert deployment_condition("router", 1, None).type == "RouterReady"
    assert deployment_condition("decoder", 1, None).type == "DecoderReady"


def test_a_deleted_deployment_serves_nothing() -> None:
    gone = observed().model_copy(update={"exists": False})
    assert deployment_condition("engine", 4, gone).reason == "InsufficientAvailable"


@pytest.mark.parametrize(
    ("desired", "kwargs", "is_converged", "is_rolling"),
    [
        (4, {}, True, False),
        (4, {"observed_generation": 2}, False, True),
        (4, {"updated": 3, "replicas": 5}, False, True),
        (4, {"available": 3}, False, False),
        # A first creation: the controller has not seen generation 1 yet, nothing runs.
        (
            2,
            {
                "generation": 1,
                "observed_generation": 0,
                "replicas": 0,
                "ready": 0,
                "available": 0,
                "updated": 0,
            },
            False,
            False,
        ),
        # A scale-up: every pod is on the current template, some are still starting.
        (4, {"spec_replicas": 4, "replicas": 4, "updated": 4, "available": 2}, False, False),
        (0, {"spec_replicas": 0, "replicas": 0, "available": 0, "updated": 0, "ready": 0}, True, False),
        (0, {"spec_replicas": 0, "replicas": 1, "available": 1, "updated": 0, "ready": 1}, False, False),
    ],
)
def test_converged_and_rolling(
    desired: int, kwargs: dict[str, Any], is_converged: bool, is_rolling: bool
) -> None:
    seen = observed(**kwargs)
    assert converged(desired, seen) is is_converged
    assert rolling_out(desired, seen) is is_rolling


def test_newer_orders_numeric_versions_and_lets_opaque_ones_through() -> None:
    held = observed(version="100")
    assert newer(observed(version="101"), held)
    assert newer(observed(version="100"), held)
    assert not newer(observed(version="99"), held)
    assert newer(observed(version="abc"), held)
    assert newer(observed(version="5"), None)


def test_same_state_ignores_the_resource_version() -> None:
    assert observed(version="1").same_state(observed(version="2"))
    assert not observed(available=1).same_state(observed())
    assert not observed().same_state(None)
