"""Admission rule table: each rule with accepted and rejected cases and its reason code.

Every row asserts the full list of denial reasons (sorted) and warning reasons, so a rule
that fires where it shouldn't fails its row too.
"""

from __future__ import annotations

from typing import Any

import pytest

from models.admission import admit
from tests.unit.models.admission_cases import DELETE, LAST, PD, analysis, canary, edit, groups
from tests.unit.models.spec_examples import (
    CHAT_CAPACITY_FACTORS,
    MISTRAL_KV_V1,
    MISTRAL_PD,
    MISTRAL_ROLLING,
)

pytestmark = pytest.mark.unit

NO_MODE = edit(spec__deploymentMode=DELETE)
ANNOTATED = edit(
    NO_MODE,
    spec__engine__annotations={"ome.io/deploymentMode": "OMENative"},
    spec__decoder__annotations={"ome.io/deploymentMode": "OMENative"},
)
MULTI_POD_ONLY = edit(NO_MODE, spec__engine__leader={}, spec__engine__worker={"size": 1},
                      spec__decoder__leader={}, spec__decoder__worker={"size": 1})
PROBE = {"path": "/health", "method": "GET", "acceptStatuses": [200], "gateStatuses": [503], "period": "10s",
         "timeout": "2s", "failureThreshold": 3, "successThreshold": 1, "allFailedPolicy": "PreserveTraffic"}
POLL = {"path": "/capacity", "method": "GET", "format": "Report", "samples": 3, "quorum": 2, "period": "10s",
        "timeout": "2s", "maxAge": "30s"}
MIGRATION = '{"schemaVersion":"v1","component":"engine","instance":0,"from_node":"gpu-node-1","reason":"maintenance"}'
RT = "ome.io/rollout-ready-timeout"

Row = tuple[str, Any, Any, list[str], list[str]]
ROWS: list[Row] = [
    # --- shape: unknown fields, types, durations ---
    ("unknown spec field", edit(spec__foo=1), None, ["UnknownField"], []),
    ("unknown nested field", edit(spec__engine__lifecycle={"bogus": True}), None, ["UnknownField"], []),
    ("removed placement.capacityFactors", edit(CHAT_CAPACITY_FACTORS, spec__placement__capacityFactors={"worker-b": "3"}),
     None, ["UnknownField"], []),
    ("string where an int goes", edit(spec__engine__minReplicas="2"), None, ["FieldValueInvalid"], []),
    ("spec.deploymentMode MultiNode", edit(spec__deploymentMode="MultiNode"), None, ["FieldValueInvalid"], []),
    ("duration without units", edit(spec__engine__lifecycle={"instanceReadyTimeout": "30"}), None, ["InvalidDuration"], []),
    ("duration with units", edit(spec__engine__lifecycle={"instanceReadyTimeout": "45m"}), None, [], []),
    ("not an object", ["not", "a", "manifest"], None, ["InvalidObject"], []),
    ("metadata missing", edit(metadata=DELETE), None, ["FieldRequired"], []),
    # --- metadata ---
    ("name not DNS-1123", edit(metadata__name="Mistral_PD"), None, ["InvalidName"], []),
    ("name too long", edit(metadata__name="a" * 64), None, ["InvalidName"], []),
    ("namespace not DNS-1123", edit(metadata__namespace="Prod"), None, ["InvalidName"], []),
    ("ready-timeout not a duration", edit(metadata__annotations={RT: "abc"}), None, ["InvalidDuration"], []),
    ("ready-timeout under a minute warns", edit(metadata__annotations={RT: "30s"}), None, [], ["RolloutTimeoutTooShort"]),
    ("ready-timeout of minutes", edit(metadata__annotations={RT: "20m"}), None, [], []),
    ("ready-timeout 0 is ignored", edit(metadata__annotations={RT: "0s"}), None, [], []),
    ("migration request well formed", edit(metadata__annotations={"ome.io/migration-request-v1-1b2c": MIGRATION}),
     None, [], []),
    ("migration request not JSON", edit(metadata__annotations={"ome.io/migration-request-v1-1b2c": "{"}),
     None, ["InvalidMigrationRequest"], []),
    ("migration request bad component", edit(metadata__annotations={
        "ome.io/migration-request-v1-1b2c": MIGRATION.replace('"engine"', '"gpu"')}), None, ["InvalidMigrationRequest"], []),
    # --- components ---
    ("negative minReplicas", edit(spec__engine__minReplicas=-1), None, ["InvalidReplicas"], []),
    ("minReplicas above maxReplicas", edit(spec__engine__minReplicas=3), None, ["InvalidReplicas"], []),
    ("scale to zero", edit(spec__router__minReplicas=0, spec__router__maxReplicas=0), None, [], []),
    ("worker size 0", edit(spec__engine__worker={"size": 0}), None, ["InvalidWorkerSize"], []),
    ("unknown deploymentMode annotation", edit(spec__router__annotations={"ome.io/deploymentMode": "Serverless"}),
     None, ["InvalidDeploymentMode"], []),
    ("MultiNode router", edit(spec__router__annotations={"ome.io/deploymentMode": "MultiNode"}),
     None, ["InvalidDeploymentMode"], []),
    # Admitted, as OME admits it, with a warning: this product runs no LeaderWorkerSet.
    ("MultiNode engine", edit(spec__rollout=DELETE, spec__engine__annotations={"ome.io/deploymentMode": "MultiNode"}),
     None, [], ["MultiNodeNotSupported"]),
    ("update budgets both zero", edit(spec__engine__lifecycle={"updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}),
     None, ["ZeroBudgetPacingUnstartable"], []),
    ("update budget surge zero only", edit(spec__engine__lifecycle={"updateStrategy": {"type": "RecreatePod", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}}}),
     None, [], []),
    ("update budget negative", edit(spec__engine__lifecycle={"updateStrategy": {"rollingUpdate": {"maxSurge": -1}}}),
     None, ["InvalidRollingUpdateInteger"], []),
    ("update budget over 100%", edit(spec__engine__lifecycle={"updateStrategy": {"rollingUpdate": {"maxUnavailable": "150%"}}}),
     None, ["InvalidRollingUpdatePercent"], []),
    ("update budget quoted number", edit(spec__engine__lifecycle={"updateStrategy": {"rollingUpdate": {"maxSurge": "2"}}}),
     None, ["InvalidRollingUpdatePercent"], []),
    ("negative partition", edit(spec__engine__lifecycle={"updateStrategy": {"rollingUpdate": {"partition": -1}}}),
     None, ["InvalidRollingUpdateInteger"], []),
    ("negative minReadySeconds", edit(spec__engine__lifecycle={"minReadySeconds": -5}), None, ["InvalidLifecycle"], []),
    ("full lifecycle block", edit(spec__engine__lifecycle={
        "restartPolicy": "None", "instanceReadyTimeout": "45m", "minReadySeconds": 10,
        "migrationPolicy": {"mode": "Never"},
        "updateStrategy": {"type": "InPlaceIfPossible", "rollingUpdate": {"partition": 1, "maxUnavailable": 1}}}),
     None, [], []),
    # --- routing ---
    ("capacity factor zero", edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"worker-b": "0"}),
     None, ["InvalidRoutingPolicy"], []),
    ("capacity factor negative", edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"worker-b": "-1"}),
     None, ["InvalidRoutingPolicy"], []),
    ("capacity factor not a quantity", edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"worker-b": "three"}),
     None, ["InvalidRoutingPolicy"], []),
    ("capacity factor milli", edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"worker-b": "500m"}), None, [], []),
    ("capacity factor unquoted", edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"worker-b": 3}), None, [], []),
    ("capacity factor key not a cluster name", edit(CHAT_CAPACITY_FACTORS, spec__routing__capacityFactors={"Worker_B": "3"}),
     None, ["InvalidRoutingPolicy"], []),
    ("probe complete", edit(spec__routing={"probe": PROBE}), None, [], []),
    ("probe disabled", edit(spec__routing={"probe": {"disabled": True}}), None, [], []),
    ("probe missing fields", edit(spec__routing={"probe": {"path": "/health"}}), None, ["InvalidRoutingPolicy"], []),
    ("probe status accepted and gated", edit(spec__routing={"probe": {**PROBE, "acceptStatuses": [200, 503]}}),
     None, ["InvalidRoutingPolicy"], []),
    ("probe gates 429", edit(spec__routing={"probe": {**PROBE, "gateStatuses": [429]}}), None, ["InvalidRoutingPolicy"], []),
    ("probe timeout not below period", edit(spec__routing={"probe": {**PROBE, "timeout": "10s"}}),
     None, ["InvalidRoutingPolicy"], []),
    ("capacity poll complete", edit(spec__routing={"capacity": POLL}), None, [], []),
    ("capacity poll missing fields", edit(spec__routing={"capacity": {"path": "/capacity"}}), None, ["InvalidRoutingPolicy"], []),
    ("capacity poll maxAge short", edit(spec__routing={"capacity": {**POLL, "maxAge": "15s"}}), None, ["InvalidRoutingPolicy"], []),
    ("capacity poll unknown format", edit(spec__routing={"capacity": {**POLL, "format": "report"}}),
     None, ["InvalidRoutingPolicy"], []),
    # --- placement ---
    ("ClusterAffinity without mode", edit(CHAT_CAPACITY_FACTORS, spec__placement__mode=DELETE), None, ["InvalidPlacement"], []),
    ("affinity terms without the policy", edit(CHAT_CAPACITY_FACTORS, spec__placement__policy=DELETE), None, ["InvalidPlacement"], []),
    ("ClusterAffinity removed", edit(CHAT_CAPACITY_FACTORS, spec__placement=DELETE), CHAT_CAPACITY_FACTORS,
     ["InvalidPlacement"], []),
    ("In without values", edit(CHAT_CAPACITY_FACTORS, spec__placement__clusterAffinity=[
        {"matchFields": [{"key": "metadata.name", "operator": "In"}]}]), None, ["InvalidPlacement"], []),
    ("replacementTimeout with All", edit(CHAT_CAPACITY_FACTORS, spec__placement__replacementTimeout="10m"),
     None, ["InvalidPlacement"], []),
    ("replacementTimeout with Single", edit(CHAT_CAPACITY_FACTORS, spec__placement__mode="Single",
                                            spec__placement__replacementTimeout="10m"), None, [], []),
    ("legacy placement", edit(CHAT_CAPACITY_FACTORS, spec__placement={"mode": "Single", "clusterSelector": "gpu=h100"}),
     None, [], []),
    # --- rollout groups: OMENative ---
    ("group without OMENative", NO_MODE, None, ["CoordinationRequiresOMENative"] * 2, []),
    ("group with leader and worker only", MULTI_POD_ONLY, None, ["CoordinationRequiresOMENative"] * 2, []),
    ("group with annotations", ANNOTATED, None, [], []),
    ("canary without OMENative", groups({"components": PD, "canary": canary(LAST)}, base=NO_MODE),
     None, ["CanaryRequiresOMENative"] * 2, []),
    ("annotation opts a component out", edit(spec__engine__annotations={"ome.io/deploymentMode": "RawDeployment"}),
     None, ["CoordinationRequiresOMENative"], []),
    # --- rollout groups: membership ---
    ("four groups", groups({"components": ["engine"]}, {"components": ["decoder"]}, {"components": ["router"]},
                           {"components": ["engine"]}),
     None, ["DuplicateComponentInCoordinationGroups", "TooManyRolloutGroups"], []),
    ("component in two groups", groups({"components": PD}, {"components": ["engine"]}, ordering="Concurrent"),
     None, ["DuplicateComponentInCoordinationGroups"], []),
    ("component twice in a group", groups({"components": ["engine", "engine", "decoder"]}),
     None, ["DuplicateComponentInCoordinationGroups"], []),
    ("not a component", groups({"components": ["engine", "decoder", "gpu"]}), None, ["InvalidComponentInCoordinationGroup"], []),
    ("empty group", groups({"components": []}), None, ["InvalidComponentInCoordinationGroup"], []),
    ("undeclared component", groups({"components": ["router"]}, base=edit(spec__router=DELETE)),
     None, ["OrphanCoordinationGroup"], []),
    ("two progressions", groups({"components": PD, "blueGreen": {}, "rollingUpdate": {}}), None, ["InvalidProgression"], []),
    ("policyRef alone", groups({"components": PD, "policyRef": {"name": "safe"}}), None, ["RolloutPolicyRefUnsupported"], []),
    ("policyRef shadowed by inline", groups({"components": PD, "policyRef": {"name": "safe"}, "blueGreen": {}}),
     None, [], []),
    # --- ordering and sequences ---
    ("canary beside a group, Sequential", groups({"components": PD, "canary": canary(LAST)}, {"components": ["router"]}),
     None, ["GroupOrderingNotHonored"], []),
    ("canary beside a group, Concurrent", groups({"components": PD, "canary": canary(LAST)}, {"components": ["router"]},
                                                 ordering="Concurrent"), None, [], []),
    ("sequence of three", groups({"components": ["decoder"], "soak": "5m"}, {"components": ["engine"], "soak": "1m"},
                                 {"components": ["router"]}), None, [], []),
    ("sequence under Concurrent", groups({"components": ["decoder"]}, {"components": ["engine"]}, ordering="Concurrent"),
     None, ["OrderNotHonored"], []),
    ("canary beside a sequence", groups({"components": ["router"], "canary": canary(LAST)}, {"components": ["decoder"], "soak": "5m"},
                                        {"components": ["engine"]}, ordering="Concurrent"), None, [], []),
    ("two groups not a sequence", groups({"components": PD}, {"components": ["router"], "rollingUpdate": {}}),
     None, ["GroupOrderingNotHonored"], []),
    ("soak on a two-component group", groups({"components": PD, "soak": "5m"}), None, ["SoakNotHonored"], []),
    ("soak on a lone group", groups({"components": ["engine"], "soak": "5m"}), None, ["SoakNotHonored"], []),
    ("soak on a canary group", groups({"components": ["router"], "canary": canary(LAST), "soak": "5m"},
                                      {"components": ["decoder"]}, {"components": ["engine"]}, ordering="Concurrent"),
     None, ["SoakNotHonored"], []),
    ("soak without units", groups({"components": ["decoder"], "soak": "10"}, {"components": ["engine"]}),
     None, ["InvalidDuration"], []),
    # --- canary ---
    ("canary names engine only", groups({"components": ["engine"], "canary": canary(LAST)}), None, ["CanaryInvalid"], []),
    ("canary engine only without a decoder", groups({"components": ["engine"], "canary": canary(LAST)},
                                                    base=edit(spec__decoder=DELETE)), None, [], []),
    ("canary decoder without an engine", groups({"components": ["decoder"], "canary": canary(LAST)},
                                                base=edit(spec__engine=DELETE)), None, ["CanaryInvalid"], []),
    ("canary split across groups", groups({"components": ["engine"], "canary": canary(LAST)},
                                          {"components": ["decoder"], "canary": canary(LAST)}, ordering="Concurrent"),
     None, ["CanaryInvalid", "CanaryInvalid", "MultipleCanaryGroups"], []),
    ("canary last step not 100%", groups({"components": PD, "canary": canary({"capacity": "50%", "traffic": 100})}),
     None, ["CanaryInvalid"], []),
    ("canary last traffic not 100", groups({"components": PD, "canary": canary({"capacity": "100%", "traffic": 90})}),
     None, ["CanaryInvalid"], []),
    ("canary traffic decreases", groups({"components": PD, "canary": canary({"capacity": "50%", "traffic": 50},
                                                                            {"capacity": "60%", "traffic": 40}, LAST)}),
     None, ["CanaryInvalid"], []),
    ("canary quoted count", groups({"components": PD, "canary": canary({"capacity": "2", "traffic": 10}, LAST)}),
     None, ["CanaryInvalid"], []),
    ("canary unquoted count", groups({"components": PD, "canary": canary({"capacity": 1, "traffic": 10}, LAST)}), None, [], []),
    ("canary traffic without capacity", groups({"components": PD, "canary": canary({"capacity": "0%", "traffic": 10}, LAST)}),
     None, ["CanaryInvalid"], []),
    ("canary traffic over 100", groups({"components": PD, "canary": canary({"capacity": "50%", "traffic": 120}, LAST)}),
     None, ["CanaryInvalid"], []),
    ("canary 21 steps", groups({"components": PD, "canary": canary(*([{"capacity": "10%", "traffic": 0}] * 20), LAST)}),
     None, ["CanaryInvalid"], []),
    ("canary 20 steps", groups({"components": PD, "canary": canary(*([{"capacity": "10%", "traffic": 0}] * 19), LAST)}),
     None, [], []),
    ("canary no steps", groups({"components": PD, "canary": canary()}), None, ["CanaryInvalid"], []),
    ("canary with maintainRatio", groups({"components": PD, "canary": canary(LAST), "maintainRatio": {"tolerance": 5}}),
     None, ["CanaryInvalid"], []),
    ("canary readyTimeout zero", groups({"components": PD, "canary": canary(LAST, readyTimeout="0s")}), None, ["CanaryInvalid"], []),
    ("canary timed pause", groups({"components": PD, "canary": canary({"capacity": "25%", "traffic": 10, "pause": {"duration": "10m"}},
                                                                      LAST, readyTimeout="20m", scaleDownDelaySeconds=60)}),
     None, [], []),
    ("canary pause without units", groups({"components": PD, "canary": canary({"capacity": "25%", "traffic": 10,
                                                                               "pause": {"duration": "10"}}, LAST)}),
     None, ["InvalidDuration"], []),
    ("canary two metric sources", groups({"components": PD, "canary": canary(LAST, prometheus={
        "providerRef": {"name": "prom"}, "serverAddress": "http://prom:9090"})}), None, ["CanaryInvalid"], []),
    # --- analysis ---
    ("analysis valid", groups({"components": PD, "canary": canary({"capacity": "25%", "traffic": 10, "analysis": analysis()}, LAST)}),
     None, [], []),
    ("analysis interval zero", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(interval="0s")}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis failureLimit zero", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(failureLimit=0)}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis no metrics", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(metrics=[])}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis metric without name", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(metrics=[
            {"name": "", "query": "q", "operator": "LT", "threshold": "1"}])}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis metric without query", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(metrics=[
            {"name": "p99", "query": " ", "operator": "LT", "threshold": "1"}])}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis threshold not numeric", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(metrics=[
            {"name": "p99", "query": "q", "operator": "LT", "threshold": "fast"}])}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis duplicate metric names", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(metrics=[
            {"name": "p99", "query": "q", "operator": "LT", "threshold": "1"},
            {"name": "p99", "query": "q2", "operator": "GT", "threshold": "2"}])}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis unknown operator", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": analysis(metrics=[
            {"name": "p99", "query": "q", "operator": "EQ", "threshold": "1"}])}, LAST)}), None, ["AnalysisInvalid"], []),
    ("analysis missing failureLimit", groups({"components": PD, "canary": canary(
        {"capacity": "25%", "traffic": 10, "analysis": {"interval": "1m", "metrics": []}}, LAST)}), None, ["AnalysisInvalid"], []),
    # --- rolling update groups ---
    ("rolling update defaults", groups({"components": PD, "rollingUpdate": {}}), None, [], []),
    ("rolling update both zero", groups({"components": PD, "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
     None, ["ZeroBudgetPacingUnstartable"], []),
    ("rolling update negative", groups({"components": PD, "rollingUpdate": {"maxSurge": -1}}),
     None, ["InvalidRollingUpdateInteger"], []),
    ("rolling update bad percent", groups({"components": PD, "rollingUpdate": {"maxUnavailable": "ten%"}}),
     None, ["InvalidRollingUpdatePercent"], []),
    ("ratio tolerance 50", groups({"components": PD, "rollingUpdate": {}, "maintainRatio": {"tolerance": 50}}), None, [], []),
    ("ratio tolerance 60 warns", groups({"components": PD, "rollingUpdate": {}, "maintainRatio": {"tolerance": 60}}),
     None, [], ["RatioToleranceTooHigh"]),
    ("ratio tolerance 101", groups({"components": PD, "maintainRatio": {"tolerance": 101}}), None, ["InvalidRatioTolerance"], []),
    ("ratio tolerance negative", groups({"components": PD, "maintainRatio": {"tolerance": -1}}), None, ["InvalidRatioTolerance"], []),
    ("lockstep edit of one component", edit(MISTRAL_ROLLING, spec__engine__runner={"image": "sglang:2"}), MISTRAL_ROLLING,
     ["RollingUpdateLockstepViolation"], []),
    ("lockstep edit of both", edit(MISTRAL_ROLLING, spec__engine__runner={"image": "sglang:2"},
                                   spec__decoder__runner={"image": "sglang:2"}), MISTRAL_ROLLING, [], []),
    ("lockstep replica edit", edit(MISTRAL_ROLLING, spec__engine__maxReplicas=6), MISTRAL_ROLLING, [], []),
    ("lockstep on create", edit(MISTRAL_ROLLING, spec__engine__runner={"image": "sglang:2"}), None, [], []),
    # --- pairing protocol ---
    ("pairing change in a sequence", groups({"components": ["decoder"]}, {"components": ["engine"]}, pairingProtocol="kv-v2"),
     MISTRAL_KV_V1, ["PairingProtocolChangeUncoordinated"], []),
    ("pairing change by rolling update", groups({"components": PD, "rollingUpdate": {}}, pairingProtocol="kv-v2"),
     MISTRAL_KV_V1, ["PairingProtocolChangeUncoordinated"], []),
    ("pairing change without groups", edit(spec__rollout={"pairingProtocol": "kv-v2"}), MISTRAL_KV_V1,
     ["PairingProtocolChangeUncoordinated"], []),
    ("pairing change in a canary group", groups({"components": PD, "canary": canary(LAST)}, pairingProtocol="kv-v2"),
     MISTRAL_KV_V1, [], []),
    ("pairing token set first time", edit(spec__rollout={"pairingProtocol": "kv-v1"}), MISTRAL_PD, [], []),
    ("pairing token cleared", edit(spec__rollout={}), MISTRAL_KV_V1, [], []),
    ("pairing token unchanged", edit(MISTRAL_KV_V1, spec__rollout__groups=[{"components": ["decoder"]}, {"components": ["engine"]}]),
     MISTRAL_KV_V1, [], []),
]


@pytest.mark.parametrize(("case", "manifest", "old", "denials", "warnings"), ROWS, ids=[r[0] for r in ROWS])
def test_rule(case: str, manifest: Any, old: Any, denials: list[str], warnings: list[str]) -> None:
    result = admit(manifest, old)
    assert sorted(result.reasons) == sorted(denials), result.summary()
    assert result.warning_reasons == warnings, result.summary()
    assert result.allowed is (not denials)
    for finding in result.denials + result.warnings:
        # Messages end in the reason in parentheses and name a field.
        assert finding.message.endswith(f"({finding.reason})")
        assert finding.field or finding.reason == "InvalidObject"
