"""Admission messages read like the spec's: exact texts where the spec prints one."""

from __future__ import annotations

import pytest

from models.admission import admit
from tests.unit.models.admission_cases import DELETE, LAST, PD, analysis, canary, edit, groups
from tests.unit.models.spec_examples import CHAT_CAPACITY_FACTORS, MISTRAL_PD

pytestmark = pytest.mark.unit


def messages(manifest: object, old: object = None) -> list[str]:
    return [finding.message for finding in admit(manifest, old).denials]  # type: ignore[arg-type]


def test_capacity_factor_message_is_the_spec_log_line() -> None:
    manifest = edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"worker-b": "0"})
    assert messages(manifest) == ['spec.routing.capacityFactors["worker-b"] must be positive, got "0" (InvalidRoutingPolicy)']


def test_removed_field_names_the_field_and_the_move() -> None:
    manifest = edit(CHAT_CAPACITY_FACTORS, spec__routing=DELETE, spec__placement__capacityFactors={"worker-b": "3"})
    result = admit(manifest)
    assert not result.allowed and result.isvc is None
    [denial] = result.denials
    assert denial.field == "spec.placement.capacityFactors"
    assert 'unknown field "spec.placement.capacityFactors"' in denial.message
    assert "spec.routing.capacityFactors" in denial.message


def test_unknown_field_anywhere_names_its_path() -> None:
    manifest = edit(spec__rollout__groups=[{"components": PD, "canary": canary({**LAST, "weight": 5})}])
    [denial] = admit(manifest).denials
    assert denial.field == "spec.rollout.groups[0].canary.steps[0].weight"
    assert denial.message.startswith('unknown field "spec.rollout.groups[0].canary.steps[0].weight"')


def test_type_error_names_the_path_and_value() -> None:
    [denial] = admit(edit(spec__engine__minReplicas="2")).denials
    assert denial.field == "spec.engine.minReplicas"
    assert denial.message.startswith("spec.engine.minReplicas: ") and "'2'" in denial.message


def test_map_key_paths_are_quoted() -> None:
    manifest = edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"worker-b": "three"})
    [denial] = admit(manifest).denials
    assert denial.field == 'spec.routing.capacityFactors["worker-b"]'


@pytest.mark.parametrize(
    ("metric_or_analysis", "expected"),
    [
        (analysis(interval="0s"), "spec.rollout.groups[0].canary.steps[0].analysis: interval must be > 0 (AnalysisInvalid)"),
        (analysis(metrics=[{"name": "", "query": "q", "operator": "LT", "threshold": "1"}]),
         "spec.rollout.groups[0].canary.steps[0].analysis.metrics[0].name must not be empty (AnalysisInvalid)"),
        (analysis(metrics=[{"name": "p99", "query": "", "operator": "LT", "threshold": "1"}]),
         'spec.rollout.groups[0].canary.steps[0].analysis.metrics[0] ("p99"): query must not be empty (AnalysisInvalid)'),
        (analysis(metrics=[{"name": "p99", "query": "q", "operator": "LT", "threshold": "fast"}]),
         'spec.rollout.groups[0].canary.steps[0].analysis.metrics[0] ("p99"): threshold "fast" must be numeric (AnalysisInvalid)'),
    ],
)
def test_analysis_messages_are_the_webhook_texts(metric_or_analysis: dict[str, object], expected: str) -> None:
    manifest = groups({"components": PD, "canary": canary({"capacity": "25%", "traffic": 10, "analysis": metric_or_analysis}, LAST)})
    assert messages(manifest) == [expected]


def test_canary_requires_omenative_shows_the_empty_mode() -> None:
    manifest = groups({"components": PD, "canary": canary(LAST)}, base=edit(spec__deploymentMode=DELETE))
    texts = messages(manifest)
    assert len(texts) == 2 and all('deploymentMode=""' in t and t.endswith("(CanaryRequiresOMENative)") for t in texts)


def test_canary_unit_split_message() -> None:
    [text] = messages(groups({"components": ["decoder"], "canary": canary(LAST)}))
    assert "a canary group naming either must name both" in text


def test_probe_and_capacity_messages_follow_the_reference() -> None:
    probe = {"path": "/h", "method": "GET", "acceptStatuses": [200, 503], "gateStatuses": [503], "period": "10s",
             "timeout": "2s", "failureThreshold": 3, "successThreshold": 1, "allFailedPolicy": "Drain"}
    assert messages(edit(spec__routing={"probe": probe})) == [
        "spec.routing.probe status 503 is in both acceptStatuses and gateStatuses (InvalidRoutingPolicy)"]
    poll = {"path": "/c", "method": "GET", "format": "Report", "samples": 3, "quorum": 3, "period": "10s",
            "timeout": "2s", "maxAge": "20s"}
    assert messages(edit(spec__routing={"capacity": poll})) == [
        "spec.routing.capacity.maxAge (20s) must span at least quorum (3) period intervals (InvalidRoutingPolicy)"]
    assert messages(edit(spec__routing={"capacity": {"path": "/c"}})) == [
        "an enabled capacity poll must specify path, method, format, period, timeout, samples, quorum, and maxAge "
        "(InvalidRoutingPolicy)"]


def test_pairing_refusal_names_both_tokens() -> None:
    old = groups({"components": PD}, pairingProtocol="kv-v1")
    new = groups({"components": ["decoder"]}, {"components": ["engine"]}, pairingProtocol="kv-v2")
    [text] = messages(new, old)
    assert '"kv-v1"' in text and '"kv-v2"' in text and text.endswith("(PairingProtocolChangeUncoordinated)")


def test_admits_parsed_objects_too() -> None:
    from models.inferenceservice import InferenceService

    result = admit(InferenceService.model_validate(MISTRAL_PD), InferenceService.model_validate(MISTRAL_PD))
    assert result.allowed
