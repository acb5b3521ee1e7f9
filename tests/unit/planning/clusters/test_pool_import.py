"""`planning.clusters.pool_import`: InferencePoolImports from exported InferencePools."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from planning.clusters.pool_import import (
    CONTROLLER_NAME,
    EXPORT_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    exported_conditions,
    exporters,
    plan_imports,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
STAMP = "2026-01-02T03:04:05Z"


def pool(namespace: str, name: str, export: str | None = "ClusterSet", **status: Any) -> dict[str, Any]:
    annotations = {EXPORT_ANNOTATION: export} if export else {}
    return {"metadata": {"namespace": namespace, "name": name, "annotations": annotations}, "status": status}


def ours(*clusters: str, since: str = STAMP) -> dict[str, Any]:
    return {
        "name": CONTROLLER_NAME,
        "exportingClusters": [{"name": c} for c in clusters],
        "conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted",
             "message": f"exported by {', '.join(clusters)}", "lastTransitionTime": since}
        ],
    }


def an_import(namespace: str, name: str, controllers: list[dict[str, Any]], managed: bool = True) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY} if managed else {}
    return {"metadata": {"namespace": namespace, "name": name, "labels": labels}, "status": {"controllers": controllers}}


def test_exporters_are_sorted_and_only_annotated_pools_count() -> None:
    found = exporters(
        {
            "worker-b": [pool("llm", "p"), pool("llm", "q", export=None)],
            "worker-a": [pool("llm", "p"), pool("llm", "r", export="Other")],
        }
    )
    assert found == {("llm", "p"): ["worker-a", "worker-b"]}


def test_a_new_export_creates_the_namespace_and_the_import() -> None:
    plan = plan_imports({("llm", "p"): ["worker-a"]}, [], {"default"}, NOW)
    assert plan.namespaces == ["llm"]
    assert plan.creates == [
        {
            "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
            "kind": "InferencePoolImport",
            "metadata": {"namespace": "llm", "name": "p", "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
        }
    ]
    assert plan.statuses == {("llm", "p"): [ours("worker-a")]}
    assert plan.deletes == []


def test_an_up_to_date_import_plans_nothing_and_keeps_its_transition_time() -> None:
    existing = an_import("llm", "p", [ours("worker-a", since="2025-01-01T00:00:00Z")])
    plan = plan_imports({("llm", "p"): ["worker-a"]}, [existing], {"llm"}, NOW)
    assert (plan.namespaces, plan.creates, plan.statuses, plan.deletes) == ([], [], {}, [])


def test_a_second_exporter_is_added_and_other_controllers_kept() -> None:
    other = {"name": "example.com/gateway", "exportingClusters": [{"name": "x"}], "conditions": []}
    existing = an_import("llm", "p", [other, ours("worker-a")], managed=False)
    plan = plan_imports({("llm", "p"): ["worker-a", "worker-b"]}, [existing], {"llm"}, NOW)
    assert plan.statuses == {("llm", "p"): [other, ours("worker-a", "worker-b")]}


def test_last_exporter_gone_deletes_our_import_but_only_unlists_us_from_others() -> None:
    other = {"name": "example.com/gateway", "exportingClusters": [], "conditions": []}
    mine = an_import("llm", "p", [ours("worker-a")])
    theirs = an_import("llm", "q", [other, ours("worker-a")], managed=False)
    plan = plan_imports({}, [mine, theirs], {"llm"}, NOW)
    assert plan.deletes == [("llm", "p")]
    assert plan.statuses == {("llm", "q"): [other]}


def test_exported_condition_is_added_once() -> None:
    ready = {"type": "Ready", "status": "True"}
    conditions = exported_conditions(pool("llm", "p", conditions=[ready]), NOW)
    assert conditions == [
        ready,
        {"type": "Exported", "status": "True", "reason": "Exported",
         "message": "imported on the control plane as InferencePoolImport llm/p", "lastTransitionTime": STAMP},
    ]
    assert exported_conditions(pool("llm", "p", conditions=conditions), NOW) is None


def test_exported_condition_goes_with_the_export() -> None:
    ready = {"type": "Ready", "status": "True"}
    exported = {"type": "Exported", "status": "True", "reason": "Exported"}
    assert exported_conditions(pool("llm", "p", export=None, conditions=[ready, exported]), NOW) == [ready]
    assert exported_conditions(pool("llm", "p", export=None, conditions=[ready]), NOW) is None
