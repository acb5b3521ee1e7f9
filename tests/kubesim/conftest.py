"""Fixtures for the kubesim contract tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kubernetes
import pytest

from kubesim.handle import KubeSim
from tests.kubesim.helpers import Clients


@pytest.fixture
def k8s(kubesim_session: KubeSim) -> Iterator[Clients]:
    """Clients on the shared cluster and a fresh namespace for this test."""
    api = kubesim_session.api_client()
    core = kubernetes.client.CoreV1Api(api)
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    yield Clients(kubesim_session, api, core, kubernetes.client.AppsV1Api(api), kubernetes.client.PolicyV1Api(api),
                  kubernetes.client.CustomObjectsApi(api), namespace)
    api.close()
