"""Instances the InferenceReplica told to delete before they were ever heard from are removed
once (`replica-launched-removals`; the rule: tests/unit/test_replica_launched_removals.py).

A ResourceQuota holds the namespace to one pod, so a scale-up's new Instances wait for room
(`QuotaExceeded`) and send no report: their parent counts them from its launch records. The
scale-down that follows tells them to delete, and an admission webhook holds their headless
Services' deletion a few seconds, so they stay unheard of while the remaining Instance's pod
restarts and the InferenceReplica plans again. Runs from before counted them as live `Creating`
Instances then, told them to delete a second time, and kept their indexes reserved for good: the
next scale-up started Instances 3 and 4 instead of 1 and 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import kubernetes
import pytest
from temporalio.client import Client

from kubesim.handle import KubeSim
from tests.kubesim.test_admission_webhooks import WebhookServer
from tests.workflows.service_harness import NAMESPACE, Story, eventually, isvc_manifest, story
from tests.workflows.test_replica_deletes_counted import instance, signals
from tests.workflows.test_replica_teardown import live_pods

pytestmark = pytest.mark.workflows

SERVICE_DELETE_SECONDS = 4.0
"""How long the webhook holds each Service's deletion: the Instances' deletions wait for it."""


@pytest.fixture(scope="module")
def hook_server() -> Iterator[WebhookServer]:
    server = WebhookServer().start()
    yield server
    server.stop()


def hold_service_deletes(kubesim: KubeSim, server: WebhookServer) -> None:
    server.delays["/slow-service-delete"] = SERVICE_DELETE_SECONDS
    hook = {
        "name": "slow-service-delete.example.com",
        "clientConfig": {"url": server.url("/slow-service-delete"), "caBundle": server.ca_bundle},
        "rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
        "timeoutSeconds": 10,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    admission = kubernetes.client.AdmissionregistrationV1Api(kubesim.api_client())
    admission.create_validating_webhook_configuration({"metadata": {"name": "slow-service-delete"}, "webhooks": [hook]})


def release_service_deletes(kubesim: KubeSim) -> None:
    kubernetes.client.AdmissionregistrationV1Api(kubesim.api_client()).delete_validating_webhook_configuration(
        "slow-service-delete"
    )


async def rows(s: Story) -> list[tuple[int, str]]:
    return [(row.index, row.phase) for row in (await s.replica_status()).instance_statuses]


async def rows_are(s: Story, expected: list[tuple[int, str]]) -> bool:
    return await rows(s) == expected


async def waits_for_quota(s: Story, index: int) -> bool:
    operation = (await s.instance(index)).operation
    return operation is not None and operation.waiting == "QuotaExceeded"


def pod_indexes(s: Story) -> list[int]:
    return sorted(int(p.metadata.labels["ome.io/instance-index"]) for p in live_pods(s))


async def test_instances_told_to_delete_before_their_first_report_are_removed_once(
    dev_client: Client, task_queue: str, kubesim: KubeSim, hook_server: WebhookServer
) -> None:
    begun = datetime.now(UTC)
    async with story(dev_client, task_queue, kubesim, {"drain_seconds": 0.0}) as s:
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
        await eventually(lambda: rows_are(s, [(0, "Ready")]), "Instance 0 Ready", within=90)
        s.core.create_namespaced_resource_quota(NAMESPACE, {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}})

        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3))
        for index in (1, 2):
            await eventually(lambda index=index: waits_for_quota(s, index), f"Instance {index} waiting for quota")
        assert await rows(s) == [(0, "Ready"), (1, "Creating"), (2, "Creating")], "unheard of: from the launch records"

        hold_service_deletes(kubesim, hook_server)
        await s.apply(isvc_manifest(minReplicas=1, maxReplicas=1))
        await eventually(lambda: rows_are(s, [(0, "Ready"), (1, "Deleting"), (2, "Deleting")]), "1 and 2 Deleting")
        # Instance 0's pod restarts while their Services' deletion is held: its reports make
        # the InferenceReplica plan again (twice) with 1 and 2 still unheard of.
        (pod,) = live_pods(s)
        kubesim.kill_pod(NAMESPACE, pod.metadata.name)
        await eventually(lambda: rows_are(s, [(0, "Ready")]), "1 and 2 gone, 0 Ready again", within=60)

        for index in (1, 2):
            asked: list[Any] = await signals(s, instance(s, index), "delete", begun)
            assert [a["reason"] for a in asked] == ["ScaleDown"], f"Instance {index} told to delete once"

        # Their indexes are free again: the next scale-up starts Instances 1 and 2.
        release_service_deletes(kubesim)
        s.core.delete_namespaced_resource_quota("one-pod", NAMESPACE)
        await s.apply(isvc_manifest(minReplicas=3, maxReplicas=3))
        await eventually(lambda: rows_are(s, [(0, "Ready"), (1, "Ready"), (2, "Ready")]), "three Ready", within=90)
        assert pod_indexes(s) == [0, 1, 2]
