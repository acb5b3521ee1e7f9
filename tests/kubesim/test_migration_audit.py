"""The migration audit ConfigMap against kubesim: owned by its InferenceService, so deleting the
InferenceService removes it, whichever migration wrote it first (a drain-started one knows no
uid) and even when an earlier write left it without an owner."""

from __future__ import annotations

import time
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.migration import MigrationActivities, audit_config_map_name
from models.migration import AuditRowInput
from tests.kubesim.helpers import Clients

pytestmark = pytest.mark.kubesim

ISVC = "qwen"


def isvc(k8s: Clients) -> dict[str, Any]:
    body = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": ISVC, "namespace": k8s.namespace},
        "spec": {"engine": {"minReplicas": 1}},
    }
    created: dict[str, Any] = k8s.custom.create_namespaced_custom_object(
        "ome.io", "v1beta1", k8s.namespace, "inferenceservices", body
    )
    return created


def record(k8s: Clients, uid: str | None, phase: str = "Accepted") -> None:
    row = {"uuid": "u-1", "component": "engine", "instance": 0, "from_node": "n", "phase": phase}
    activities = MigrationActivities(k8s.api)
    ActivityEnvironment().run(
        activities.record_audit, AuditRowInput(namespace=k8s.namespace, isvc=ISVC, isvc_uid=uid, row=row)
    )


def owners(k8s: Clients) -> list[tuple[str, str, str]]:
    config_map = k8s.core.read_namespaced_config_map(audit_config_map_name(ISVC), k8s.namespace)
    return [(ref.kind, ref.name, ref.uid) for ref in config_map.metadata.owner_references or []]


def unowned_config_map(k8s: Clients) -> None:
    """The ConfigMap as a write without the uid left it, before owners were looked up."""
    k8s.core.create_namespaced_config_map(
        k8s.namespace,
        {
            "metadata": {"name": audit_config_map_name(ISVC), "labels": {"ome.io/inferenceservice": ISVC}},
            "data": {"history.json": "[]"},
        },
    )


def gone_with_the_isvc(k8s: Clients) -> bool:
    k8s.custom.delete_namespaced_custom_object("ome.io", "v1beta1", k8s.namespace, "inferenceservices", ISVC)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        names = [c.metadata.name for c in k8s.core.list_namespaced_config_map(k8s.namespace).items]
        if audit_config_map_name(ISVC) not in names:
            return True
        time.sleep(0.05)
    return False


def test_a_write_without_the_uid_reads_the_owner_from_the_inferenceservice(k8s: Clients) -> None:
    uid = isvc(k8s)["metadata"]["uid"]
    record(k8s, uid=None)  # a drain-started migration
    assert owners(k8s) == [("InferenceService", ISVC, uid)]
    assert gone_with_the_isvc(k8s), "the audit ConfigMap survived its InferenceService"


def test_an_unowned_config_map_gets_its_owner_from_the_request(k8s: Clients) -> None:
    uid = isvc(k8s)["metadata"]["uid"]
    unowned_config_map(k8s)
    record(k8s, uid=uid)
    assert owners(k8s) == [("InferenceService", ISVC, uid)]
    record(k8s, uid=uid, phase="Completed")
    assert owners(k8s) == [("InferenceService", ISVC, uid)], "the owner is added once"
    assert gone_with_the_isvc(k8s)


def test_an_unowned_config_map_without_a_uid_reads_the_owner(k8s: Clients) -> None:
    uid = isvc(k8s)["metadata"]["uid"]
    unowned_config_map(k8s)
    record(k8s, uid=None)
    assert owners(k8s) == [("InferenceService", ISVC, uid)]


def test_without_the_inferenceservice_the_row_is_still_written(k8s: Clients) -> None:
    record(k8s, uid=None)
    assert owners(k8s) == []
    config_map = k8s.core.read_namespaced_config_map(audit_config_map_name(ISVC), k8s.namespace)
    assert '"u-1"' in config_map.data["history.json"]
