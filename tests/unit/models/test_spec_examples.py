"""Every InferenceService example in the spec pages parses, round-trips and is admitted."""

from __future__ import annotations

import pytest

from models.admission import admit
from models.inferenceservice import InferenceService
from tests.unit.models.spec_examples import EXAMPLES, Manifest

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("name", "manifest", "previous"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_is_admitted(name: str, manifest: Manifest, previous: Manifest | None) -> None:
    result = admit(manifest, previous)
    assert result.allowed, result.summary()
    assert result.denials == []
    assert result.warnings == []
    assert result.isvc is not None and result.isvc.name == manifest["metadata"]["name"]


@pytest.mark.parametrize(("name", "manifest", "previous"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_round_trips(name: str, manifest: Manifest, previous: Manifest | None) -> None:
    assert InferenceService.model_validate(manifest).to_manifest() == manifest
