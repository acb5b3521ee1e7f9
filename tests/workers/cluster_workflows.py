"""A test-only workflow for the per-cluster workers (tests/workers/test_cluster_workers.py).

A module of its own: the workflow sandbox re-imports the module defining a workflow, and a
test module that imports the worker (and so the kubernetes client) would be refused.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.kube_ops import ApplyObjectInput
    from workflows import kube_calls


@workflow.defn(name="TestApplyConfigMap")
class ApplyConfigMapWorkflow:
    """Creates ConfigMap `default/<name>` through the worker's Kubernetes activities."""

    @workflow.run
    async def run(self, name: str) -> str:
        manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
        result = await kube_calls.apply_object(ApplyObjectInput(manifest=manifest), summary=f"create {name}")
        return result.action
