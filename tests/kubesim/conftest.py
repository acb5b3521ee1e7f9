"""Fixtures for the kubesim contract tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesim.handle import KubeSim
from tests.kubesim.helpers import Clients, clients


@pytest.fixture
def k8s(kubesim_session: KubeSim) -> Iterator[Clients]:
    """Clients on the shared cluster and a fresh namespace for this test."""
    yield from clients(kubesim_session)
