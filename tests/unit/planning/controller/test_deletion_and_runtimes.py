"""planning.controller.deletion and .runtimes; planning.controller.objects' helpers."""

from __future__ import annotations

from typing import Any

import pytest

from planning.controller.deletion import (
    delete_payload,
    gone_wants_delete_signal,
    release_finalizer,
    wants_delete_signal,
)
from planning.controller.objects import is_placement_copy, pointer
from planning.controller.runtimes import generation_changed, runtime_users

FINALIZER = "ome.io/isvc-teardown"


def isvc(name: str = "chat", namespace: str = "prod", runtime: str | None = "rt", **metadata: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"model": {"name": "m"}}
    if runtime:
        spec["runtime"] = {"name": runtime}
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", **metadata}, "spec": spec}


DELETION_CASES = [
    ("not deleting", {}, False),
    ("deleting, held by the product", {"deletionTimestamp": "t", "finalizers": [FINALIZER]}, True),
    ("deleting, someone else's finalizer only", {"deletionTimestamp": "t", "finalizers": ["other"]}, False),
    ("finalizer, not deleting", {"finalizers": [FINALIZER]}, False),
]


@pytest.mark.parametrize("case, metadata, expected", DELETION_CASES, ids=[c[0] for c in DELETION_CASES])
def test_wants_delete_signal(case: str, metadata: dict[str, Any], expected: bool) -> None:
    assert wants_delete_signal(isvc(**metadata)) is expected


def test_gone_without_the_finalizer_wants_delete() -> None:
    assert gone_wants_delete_signal(isvc(deletionTimestamp="t", finalizers=[]))
    assert not gone_wants_delete_signal(isvc(deletionTimestamp="t", finalizers=[FINALIZER]))


def test_gone_without_the_finalizer_it_was_seen_carrying_wants_no_delete() -> None:
    """The workflow removed its finalizer itself: it is tearing down or done, and a new run
    of that name may be serving a new object."""
    assert not gone_wants_delete_signal(isvc(finalizers=[]), seen_finalizer=True)
    assert gone_wants_delete_signal(isvc(finalizers=[]), seen_finalizer=False)


def test_the_delete_signal_names_the_objects_uid() -> None:
    assert delete_payload(isvc(deletionTimestamp="t")) == {"uid": "uid-chat"}


def test_release_finalizer_is_guarded_by_uid_and_the_finalizers_index() -> None:
    obj = isvc(deletionTimestamp="t", finalizers=["other", FINALIZER])
    assert release_finalizer(obj) == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-chat"},
        {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    assert release_finalizer(isvc(finalizers=["other"])) == []


def test_placement_copies_and_pointers() -> None:
    assert is_placement_copy(isvc(labels={"ome.io/placement-source": "uid-x"}))
    assert not is_placement_copy(isvc(labels={"app": "x"}))
    assert pointer("metadata", "annotations", "ome.io/a~b") == "/metadata/annotations/ome.io~1a~0b"


SERVICES = [
    isvc("a", "prod", "rt"),
    isvc("b", "dev", "rt"),
    isvc("c", "prod", "other"),
    isvc("d", "prod", None),
    isvc("copy", "prod", "rt", labels={"ome.io/placement-source": "uid-a"}),
]

RUNTIME_CASES = [
    ("ServingRuntime serves its namespace", "ServingRuntime", "prod", "rt", {("prod", "rt")}, [("prod", "a")]),
    ("ClusterServingRuntime where no ServingRuntime shadows it", "ClusterServingRuntime", None, "rt", {("prod", "rt")}, [("dev", "b")]),
    ("ClusterServingRuntime everywhere without shadows", "ClusterServingRuntime", None, "rt", set(), [("dev", "b"), ("prod", "a")]),
    ("nobody uses it", "ServingRuntime", "prod", "unused", {("prod", "unused")}, []),
]


@pytest.mark.parametrize(
    "case, kind, namespace, name, serving_runtimes, expected", RUNTIME_CASES, ids=[c[0] for c in RUNTIME_CASES]
)
def test_runtime_users(
    case: str, kind: Any, namespace: str | None, name: str, serving_runtimes: set[tuple[str, str]], expected: list[Any]
) -> None:
    assert runtime_users(kind, namespace, name, SERVICES, serving_runtimes) == expected


GENERATION_CASES = [
    ("same generation", 3, {"metadata": {"generation": 3}}, False),
    ("new generation", 3, {"metadata": {"generation": 4}}, True),
    ("appeared", None, {"metadata": {"generation": 1}}, True),
    ("went", 3, None, True),
    ("never seen, still absent", None, None, False),
]


@pytest.mark.parametrize("case, previous, current, expected", GENERATION_CASES, ids=[c[0] for c in GENERATION_CASES])
def test_generation_changed(case: str, previous: int | None, current: dict[str, Any] | None, expected: bool) -> None:
    assert generation_changed(previous, current) is expected
