"""planning.controller.spec: an object's spec reaches the workflow once per (generation, digest)."""

from __future__ import annotations

from typing import Any

import pytest

from planning.controller.spec import AppliedFacts, SpecDecision, decide_spec, spec_relay


def isvc(
    generation: int = 3, annotations: dict[str, str] | None = None, image: str = "a", resource_version: str = "99"
) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": "chat",
            "namespace": "prod",
            "uid": "u-1",
            "generation": generation,
            "resourceVersion": resource_version,
            "annotations": annotations or {},
            "finalizers": ["ome.io/isvc-teardown"],
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"engine": {"image": image}},
        "status": {"observedGeneration": 2},
    }


DIGEST = spec_relay(isvc()).digest

CASES = [
    ("no workflow", None, SpecDecision.SEND),
    ("workflow holds this generation and digest", AppliedFacts(5, 3, DIGEST), SpecDecision.SKIP),
    ("workflow holds a newer object generation, same digest", AppliedFacts(5, 4, DIGEST), SpecDecision.SKIP),
    ("workflow holds an older generation of the same digest", AppliedFacts(5, 2, DIGEST), SpecDecision.SEND),
    ("workflow holds another digest", AppliedFacts(5, 3, "0" * 16), SpecDecision.SEND),
    ("workflow holds a spec the temporal CLI applied", AppliedFacts(5, 0, "0" * 16), SpecDecision.SEND),
    ("workflow tearing an earlier object down", AppliedFacts(5, 9, DIGEST, deleting=True), SpecDecision.WAIT),
]


@pytest.mark.parametrize("case, applied, expected", CASES, ids=[c[0] for c in CASES])
def test_decide_spec(case: str, applied: AppliedFacts | None, expected: SpecDecision) -> None:
    assert decide_spec(spec_relay(isvc()), applied) is expected


def test_the_relay_carries_the_manifest_origin_and_an_update_id() -> None:
    relay = spec_relay(isvc())
    assert relay.manifest == {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {"engine": {"image": "a"}},
    }
    assert relay.origin() == {"object_generation": 3, "uid": "u-1", "resource_version": "99"}
    assert relay.update_id == "kube/u-1/3/99"
    assert relay.handled_key == (3, relay.digest)


def test_an_edit_back_to_an_earlier_digest_is_a_new_update_id() -> None:
    """`ome.io/traffic-drain` set, then removed: the same (generation, digest) as before the
    edit, which Temporal must not answer from its cache of the first Update of that ID."""
    before = spec_relay(isvc(resource_version="99"))
    drained = spec_relay(isvc(annotations={"ome.io/traffic-drain": "{}"}, resource_version="100"))
    back = spec_relay(isvc(resource_version="101"))
    assert back.handled_key == before.handled_key != drained.handled_key
    assert len({before.update_id, drained.update_id, back.update_id}) == 3


def test_control_annotations_do_not_change_the_digest_and_spec_annotations_do() -> None:
    plain = spec_relay(isvc()).digest
    assert spec_relay(isvc(annotations={"ome.io/rollout-paused": "true", "ome.io/rollout-promote": "x"})).digest == plain
    assert spec_relay(isvc(annotations={"ome.io/traffic-drain": "true"})).digest != plain
    assert spec_relay(isvc(image="b")).digest != plain


def test_applied_facts_read_from_the_query_answer() -> None:
    view = {"generation": 4, "object_generation": 3, "digest": "ab", "deleting": False}
    assert AppliedFacts.from_view(view) == AppliedFacts(4, 3, "ab", False)
    assert AppliedFacts.from_view({"generation": "x"}) is None
    assert AppliedFacts.from_view(None) is None
