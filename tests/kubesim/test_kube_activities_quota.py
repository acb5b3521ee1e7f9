"""The Kubernetes activities under a ResourceQuota, against kubesim: a full quota answers a
post of something already there with 403, before any check of its name (the API server's
storage finds a name taken only after the whole admission), so the activities read what is
there rather than trust the answer; and a create a quota refuses part of can answer the pods it
made (`CreatePodsInput.partial_on_quota`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from kubernetes.client.exceptions import ApiException
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.kube import KubeActivities
from models.kube_ops import ApplyObjectInput, CreatePodsInput, KubeErrorType
from tests.kubesim.activity_objects import headless_service, instance_pod, wait_for
from tests.kubesim.helpers import Clients, quota_counted

pytestmark = pytest.mark.kubesim

T = TypeVar("T")


def run(fn: Callable[[Any], T], arg: Any) -> T:
    return ActivityEnvironment().run(fn, arg)


def activities(k8s: Clients) -> KubeActivities:
    return KubeActivities(k8s.api, cluster="sim")


def test_create_first_refused_by_a_full_quota_reads_the_existing_object(k8s: Clients) -> None:
    """A full services quota answers the blind create of an existing Service with 403
    QuotaExceeded, not AlreadyExists: the apply reads it and finds it unchanged. A Service
    that is not there is refused, for good (the quota must have room first)."""
    kube, core, namespace = activities(k8s), k8s.core, k8s.namespace
    created = run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace), create_first=True))
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "one"}, "spec": {"hard": {"services": "1"}}})
    wait_for(lambda: quota_counted(core, namespace, "one"), "the quota counted")
    assert core.read_namespaced_resource_quota("one", namespace).status.used == {"services": "1"}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_service(namespace, headless_service(namespace))
    assert refused.value.status == 403, "the quota refuses before the name is found taken"
    again = run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace), create_first=True))
    assert again.action == "unchanged" and again.resource_version == created.resource_version
    with pytest.raises(ApplicationError) as caught:
        run(kube.apply_object, ApplyObjectInput(manifest=headless_service(namespace, index=1), create_first=True))
    assert caught.value.type == KubeErrorType.QUOTA_EXCEEDED and caught.value.non_retryable
    assert 'services "chat-engine-1" is forbidden: exceeded quota: one' in str(caught.value)


def test_a_create_a_quota_refuses_part_of_keeps_the_pods_it_made(k8s: Clients) -> None:
    """A quota of one pod: a gang's leader is made and its worker refused. Asked for partial
    answers, the call says so (the leader made, the refusal) instead of failing; asked again, it
    finds the leader its own though the full quota refuses a post of it before any name check
    (403, not 409), and the worker is refused again."""
    kube, core, namespace = activities(k8s), k8s.core, k8s.namespace
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "one"}, "spec": {"hard": {"pods": "1"}}})
    wait_for(lambda: quota_counted(core, namespace, "one"), "the quota counted")
    batch = [instance_pod(namespace, role="leader"), instance_pod(namespace, role="worker")]
    first = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch, partial_on_quota=True))
    assert (first.names("created"), first.refused) == (["chat-engine-0-leader-0"], KubeErrorType.QUOTA_EXCEEDED)
    assert "exceeded quota: one" in first.refused_message
    again = run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch, partial_on_quota=True))
    assert (again.names("exists"), again.refused) == (["chat-engine-0-leader-0"], KubeErrorType.QUOTA_EXCEEDED)
    assert again.pods[0].uid == first.pods[0].uid
    # Callers of before get the refusal as a failure, as they did.
    with pytest.raises(ApplicationError) as caught:
        run(kube.create_pods, CreatePodsInput(namespace=namespace, pods=batch))
    assert caught.value.type == KubeErrorType.QUOTA_EXCEEDED and caught.value.non_retryable
