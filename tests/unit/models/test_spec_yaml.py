"""The spec pages' YAML, verbatim: full manifests equal our example dicts, fragments merged
into their page's base manifest are admitted, and the removed-field form is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from models.admission import admit
from tests.unit.models.spec_examples import (
    CHAT_CAPACITY_FACTORS,
    MISTRAL_CANARY,
    MISTRAL_KV_V1,
    MISTRAL_KV_V2,
    MISTRAL_PD,
    MISTRAL_ROLLING,
    MISTRAL_SEQUENCE,
    QWEN_NVLINK,
    QWEN_SPREAD,
)

pytestmark = pytest.mark.unit

CHAT_YAML = """
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: chat
  namespace: prod
spec:
  model:
    name: llama-3-1-8b-instruct
  runtime:
    name: srt-llama-3-1-8b-instruct
  engine:
    minReplicas: 2
    maxReplicas: 4
  placement:
    policy: ClusterAffinity
    mode: All
    clusterAffinity:
      - matchFields:
          - key: metadata.name
            operator: In
            values: [worker-a, worker-b]
  routing:
    capacityFactors:
      worker-b: "3"
"""

# 000, "Move from the removed field": the old form of the same manifest.
CHAT_REMOVED_FIELD_YAML = """
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: chat
  namespace: prod
spec:
  model:
    name: llama-3-1-8b-instruct
  runtime:
    name: srt-llama-3-1-8b-instruct
  engine:
    minReplicas: 2
    maxReplicas: 4
  placement:
    policy: ClusterAffinity
    mode: All
    clusterAffinity:
      - matchFields:
          - key: metadata.name
            operator: In
            values: [worker-a, worker-b]
    capacityFactors:
      worker-b: "3"
"""

QWEN_YAML = """
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: qwen3-0-6b
  namespace: spread-demo
spec:
  deploymentMode: OMENative
  model:
    name: qwen3-0-6b
  runtime:
    name: srt-qwen3-0-6b
  engine:
    minReplicas: 2
    maxReplicas: 2
    topologySpread: Required
    topologySpreadKey: topology.kubernetes.io/zone
"""

NVLINK_FRAGMENT = """
engine:
  topologyKey: nvidia.com/gpu.clique
  topologySpread: Required
  topologySpreadKey: topology.kubernetes.io/zone
"""

MISTRAL_YAML = """
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: mistral-pd
  namespace: mistral-demo
spec:
  deploymentMode: OMENative
  model:
    name: mistral-7b-instruct-v0-2
  runtime:
    name: srt-mistral-7b-instruct-pd
  engine:
    minReplicas: 1
    maxReplicas: 1
  decoder:
    minReplicas: 1
    maxReplicas: 1
  router:
    minReplicas: 1
    maxReplicas: 1
  rollout:
    groups:
      - components: [engine, decoder]
"""

ROLLING_FRAGMENT = """
spec:
  engine:
    minReplicas: 4
    maxReplicas: 4
  decoder:
    minReplicas: 2
    maxReplicas: 2
  rollout:
    groups:
      - components: [engine, decoder]
        rollingUpdate:
          maxSurge: 1
          maxUnavailable: 0
        maintainRatio:
          tolerance: 25
"""

CANARY_FRAGMENT = """
spec:
  rollout:
    groups:
      - components: [engine, decoder]
        canary:
          steps:
            - capacity: "25%"
              traffic: 10
              pause: {}
            - capacity: "100%"
              traffic: 100
"""

PAIRING_FRAGMENT = """
spec:
  rollout:
    pairingProtocol: kv-v2
    groups:
      - components: [engine, decoder]
        blueGreen: {}
"""

SEQUENCE_FRAGMENT = """
spec:
  rollout:
    groups:
      - components: [decoder]
        soak: 10m
      - components: [engine]
"""


def merged(base: dict[str, Any], fragment: str) -> dict[str, Any]:
    """A page fragment applied as `kubectl apply` would merge it: maps deep, lists replaced."""
    def merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
        for key, value in patch.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict) and value:
                merge(into[key], value)
            else:
                into[key] = value

    result = copy.deepcopy(base)
    merge(result, yaml.safe_load(fragment))
    return result


@pytest.mark.parametrize(("text", "ours"), [(CHAT_YAML, CHAT_CAPACITY_FACTORS), (QWEN_YAML, QWEN_SPREAD),
                                            (MISTRAL_YAML, MISTRAL_PD)], ids=["000-chat", "003-qwen", "004-mistral-pd"])
def test_full_manifests_match_the_pages(text: str, ours: dict[str, Any]) -> None:
    manifest = yaml.safe_load(text)
    assert manifest == ours
    assert admit(manifest).allowed


FRAGMENTS = [
    ("004-rolling", ROLLING_FRAGMENT, MISTRAL_ROLLING),
    ("004-canary", CANARY_FRAGMENT, MISTRAL_CANARY),
    ("004-pairing", PAIRING_FRAGMENT, None),
    ("004-sequence", SEQUENCE_FRAGMENT, MISTRAL_SEQUENCE),
]


@pytest.mark.parametrize(("name", "fragment", "ours"), FRAGMENTS, ids=[f[0] for f in FRAGMENTS])
def test_fragments_completed_on_their_base_are_admitted(name: str, fragment: str, ours: dict[str, Any] | None) -> None:
    base = yaml.safe_load(MISTRAL_YAML)
    manifest = merged(base, fragment)
    result = admit(manifest, base)
    assert result.allowed, result.summary()
    if ours is not None:
        assert manifest == ours


def test_pairing_fragment_moves_kv_v1_to_kv_v2() -> None:
    running = copy.deepcopy(MISTRAL_KV_V1)
    manifest = merged(yaml.safe_load(MISTRAL_YAML), PAIRING_FRAGMENT)
    assert manifest == MISTRAL_KV_V2
    assert admit(manifest, running).allowed


def test_nvlink_fragment_on_a_multi_node_engine() -> None:
    manifest = merged(yaml.safe_load(QWEN_YAML), "spec:\n  engine:\n    leader: {}\n    worker:\n      size: 1\n")
    manifest["spec"]["engine"].update(yaml.safe_load(NVLINK_FRAGMENT)["engine"])
    assert manifest == QWEN_NVLINK
    assert admit(manifest).allowed


def test_removed_field_form_is_refused_with_the_move_hint() -> None:
    result = admit(yaml.safe_load(CHAT_REMOVED_FIELD_YAML))
    assert result.reasons == ["UnknownField"]
    assert 'unknown field "spec.placement.capacityFactors"' in result.denials[0].message
    assert "spec.routing.capacityFactors" in result.denials[0].message
