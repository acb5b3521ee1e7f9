"""Arbitrary manifests never make admission raise: the answer is always a result, and a
refusal always carries denials. Accepted manifests stay accepted after a round trip."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.admission import Admission, admit
from tests.unit.models.spec_examples import EXAMPLES, MISTRAL_PD

pytestmark = pytest.mark.unit

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["", "0", "-1", "25%", "150%", "1.5", "500m", "1e3", "1Gi", "10m", "0s", "-5m", "30",
                     "OMENative", "RawDeployment", "MultiNode", "engine", "decoder", "router", "100%", "abc%"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=12,
)

STEP = st.fixed_dictionaries(
    {"capacity": st.one_of(st.integers(-2, 5), st.sampled_from(["0%", "25%", "100%", "2", "x%", "101%"])),
     "traffic": st.integers(-5, 120)},
    optional={"pause": st.one_of(st.just({}), st.fixed_dictionaries({"duration": st.sampled_from(["1m", "0s", "-1m", "5"])})),
              "analysis": st.fixed_dictionaries({
                  "interval": st.sampled_from(["1m", "0s", "-1s"]),
                  "failureLimit": st.integers(-1, 3),
                  "metrics": st.lists(st.fixed_dictionaries({
                      "name": st.sampled_from(["", "a", "b"]), "query": st.sampled_from(["", "q"]),
                      "operator": st.sampled_from(["LT", "GTE", "EQ"]),
                      "threshold": st.sampled_from(["0.01", "x", "1e3", ""])}), max_size=3)})},
)
BUDGET = st.one_of(st.integers(-2, 3), st.sampled_from(["0%", "25%", "100%", "150%", "x", "5"]))
GROUP = st.fixed_dictionaries(
    {"components": st.lists(st.sampled_from(["engine", "decoder", "router", "gpu"]), max_size=4)},
    optional={
        "canary": st.fixed_dictionaries({"steps": st.lists(STEP, max_size=4)},
                                        optional={"readyTimeout": st.sampled_from(["0s", "5m"])}),
        "blueGreen": st.just({}),
        "rollingUpdate": st.fixed_dictionaries({}, optional={"maxSurge": BUDGET, "maxUnavailable": BUDGET}),
        "maintainRatio": st.fixed_dictionaries({}, optional={"tolerance": st.integers(-10, 120)}),
        "soak": st.sampled_from(["10m", "0s", "-1m", "10"]),
        "policyRef": st.just({"name": "p"}),
    },
)
COMPONENT = st.fixed_dictionaries(
    {},
    optional={
        "minReplicas": st.integers(-2, 5), "maxReplicas": st.integers(-2, 5),
        "annotations": st.dictionaries(st.just("ome.io/deploymentMode"),
                                       st.sampled_from(["OMENative", "RawDeployment", "MultiNode", "x"])),
        "runner": st.fixed_dictionaries({"image": st.sampled_from(["a:1", "a:2"])}),
        "worker": st.fixed_dictionaries({"size": st.integers(-1, 3)}),
        "topologyKey": st.just("rack"),
        "lifecycle": st.fixed_dictionaries({}, optional={
            "instanceReadyTimeout": st.sampled_from(["30m", "30", "0s"]),
            "updateStrategy": st.fixed_dictionaries({}, optional={
                "type": st.sampled_from(["SurgeThenDrain", "RecreatePod", "Bogus"]),
                "rollingUpdate": st.fixed_dictionaries({}, optional={"maxSurge": BUDGET, "maxUnavailable": BUDGET,
                                                                      "partition": st.integers(-1, 2)})})}),
    },
)
SPEC = st.fixed_dictionaries(
    {},
    optional={
        "deploymentMode": st.sampled_from(["OMENative", "RawDeployment", "MultiNode"]),
        "engine": COMPONENT, "decoder": COMPONENT, "router": COMPONENT,
        "routing": st.fixed_dictionaries({}, optional={"capacityFactors": st.dictionaries(
            st.sampled_from(["worker-a", "Worker_B"]), st.one_of(scalars, st.sampled_from(["0", "-1", "3", "1e400"])))}),
        "placement": st.fixed_dictionaries({}, optional={
            "policy": st.sampled_from(["ClusterAffinity", "Legacy"]), "mode": st.sampled_from(["All", "Single", "Split"]),
            "capacityFactors": st.just({"worker-b": "3"}), "replacementTimeout": st.sampled_from(["1m", "0s"])}),
        "rollout": st.fixed_dictionaries({}, optional={
            "groups": st.lists(GROUP, max_size=4),
            "groupOrdering": st.sampled_from(["Sequential", "Concurrent", "Random"]),
            "pairingProtocol": st.sampled_from(["", "kv-v1", "kv-v2"])}),
    },
)
MANIFESTS = st.builds(
    lambda name, spec: {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                        "metadata": {"name": name, "namespace": "prod"}, "spec": spec},
    st.one_of(st.just("chat"), st.sampled_from(["chat-2", "Chat", "a" * 64, "-x"])), SPEC,
)


def check(result: Admission) -> None:
    assert isinstance(result, Admission)
    assert result.allowed is (not result.denials)
    for finding in result.denials + result.warnings:
        assert finding.reason and finding.message.endswith(f"({finding.reason})")
        # The last-resort guard in admit() must never be what answers: every input has a rule.
        assert not finding.message.startswith("spec could not be validated"), finding.message


@SETTINGS
@given(json_values)
def test_any_json_value_gets_a_result(value: Any) -> None:
    result = admit(value)
    check(result)
    assert not result.allowed


@SETTINGS
@given(st.dictionaries(st.sampled_from(["apiVersion", "kind", "metadata", "spec", "status", "extra"]), json_values, max_size=5))
def test_any_object_gets_a_result(value: dict[str, Any]) -> None:
    check(admit(value))


@SETTINGS
@given(MANIFESTS, st.one_of(st.none(), MANIFESTS))
def test_manifest_shaped_input_gets_a_result(manifest: dict[str, Any], old: dict[str, Any] | None) -> None:
    result = admit(manifest, old)
    check(result)
    if result.allowed:
        assert result.isvc is not None
        # What was accepted is accepted again in its written-out form.
        assert admit(result.isvc.to_manifest(), old).allowed


@SETTINGS
@given(st.sampled_from([e[1] for e in EXAMPLES]), st.lists(st.tuples(st.integers(0, 50), json_values), max_size=3))
def test_spec_examples_with_random_edits_get_a_result(base: dict[str, Any], edits: list[tuple[int, Any]]) -> None:
    manifest = copy.deepcopy(base)
    for position, value in edits:
        # Replace a random node of the manifest with a random value.
        nodes: list[tuple[dict[str, Any], str]] = []
        stack: list[Any] = [manifest]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key, child in node.items():
                    nodes.append((node, key))
                    stack.append(child)
            elif isinstance(node, list):
                stack.extend(node)
        parent, key = nodes[position % len(nodes)]
        parent[key] = value
    check(admit(manifest, MISTRAL_PD))
