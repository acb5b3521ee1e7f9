"""Every InferenceService example of the spec pages, fragments completed into whole manifests.

Each entry: (name, manifest, previous manifest or None). Fragments from the rollout-groups
page (004) are completed on top of its `mistral-pd` manifest, the page's own base.
"""

from __future__ import annotations

import copy
from typing import Any

Manifest = dict[str, Any]

# 000: weight traffic for heterogeneous clusters, Step 1.
CHAT_CAPACITY_FACTORS: Manifest = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "prod"},
    "spec": {
        "model": {"name": "llama-3-1-8b-instruct"},
        "runtime": {"name": "srt-llama-3-1-8b-instruct"},
        "engine": {"minReplicas": 2, "maxReplicas": 4},
        "placement": {
            "policy": "ClusterAffinity",
            "mode": "All",
            "clusterAffinity": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-a", "worker-b"]}]}
            ],
        },
        "routing": {"capacityFactors": {"worker-b": "3"}},
    },
}

# 000: "Only the ratios between factors matter" and "a factor below 1, such as 0.5".
CHAT_FACTORS_RATIO: Manifest = copy.deepcopy(CHAT_CAPACITY_FACTORS)
CHAT_FACTORS_RATIO["spec"]["routing"]["capacityFactors"] = {"worker-a": "2", "worker-b": "6"}
CHAT_FACTORS_SLOW: Manifest = copy.deepcopy(CHAT_CAPACITY_FACTORS)
CHAT_FACTORS_SLOW["spec"]["routing"]["capacityFactors"] = {"worker-a": "0.5", "worker-b": "1.5"}

# 001: the object tree example: chat with OMENative, a router, engines of a leader and a worker.
CHAT_OMENATIVE_TREE: Manifest = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "default"},
    "spec": {
        "deploymentMode": "OMENative",
        "model": {"name": "llama-3-1-70b-instruct"},
        "runtime": {"name": "srt-llama-3-1-70b-instruct"},
        "router": {"minReplicas": 1, "maxReplicas": 1},
        "engine": {"minReplicas": 2, "maxReplicas": 2, "leader": {}, "worker": {"size": 1}},
    },
}

# 001: opt one component in with its annotation.
CHAT_ROUTER_ANNOTATION: Manifest = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "default"},
    "spec": {
        "model": {"name": "llama-3-1-8b-instruct"},
        "runtime": {"name": "srt-llama-3-1-8b-instruct"},
        "engine": {"minReplicas": 1, "maxReplicas": 1, "annotations": {"ome.io/deploymentMode": "OMENative"}},
        "router": {"minReplicas": 1, "maxReplicas": 1, "annotations": {"ome.io/deploymentMode": "OMENative"}},
    },
}

# 003: Step 1.
QWEN_SPREAD: Manifest = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "qwen3-0-6b", "namespace": "spread-demo"},
    "spec": {
        "deploymentMode": "OMENative",
        "model": {"name": "qwen3-0-6b"},
        "runtime": {"name": "srt-qwen3-0-6b"},
        "engine": {
            "minReplicas": 2,
            "maxReplicas": 2,
            "topologySpread": "Required",
            "topologySpreadKey": "topology.kubernetes.io/zone",
        },
    },
}

# 003: the NVLink engine fragment, on a multi-node engine.
QWEN_NVLINK: Manifest = copy.deepcopy(QWEN_SPREAD)
QWEN_NVLINK["spec"]["engine"] = {
    "minReplicas": 2,
    "maxReplicas": 2,
    "leader": {},
    "worker": {"size": 1},
    "topologyKey": "nvidia.com/gpu.clique",
    "topologySpread": "Required",
    "topologySpreadKey": "topology.kubernetes.io/zone",
}

# 004: roll prefill and decode together.
MISTRAL_PD: Manifest = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "mistral-pd", "namespace": "mistral-demo"},
    "spec": {
        "deploymentMode": "OMENative",
        "model": {"name": "mistral-7b-instruct-v0-2"},
        "runtime": {"name": "srt-mistral-7b-instruct-pd"},
        "engine": {"minReplicas": 1, "maxReplicas": 1},
        "decoder": {"minReplicas": 1, "maxReplicas": 1},
        "router": {"minReplicas": 1, "maxReplicas": 1},
        "rollout": {"groups": [{"components": ["engine", "decoder"]}]},
    },
}


def with_spec(base: Manifest, **spec: Any) -> Manifest:
    """`base` with top-level spec fields replaced (a page's fragment applied to its base)."""
    manifest = copy.deepcopy(base)
    manifest["spec"].update(copy.deepcopy(spec))
    return manifest


# 004: rolling update keeping the 2:1 ratio.
MISTRAL_ROLLING = with_spec(
    MISTRAL_PD,
    engine={"minReplicas": 4, "maxReplicas": 4},
    decoder={"minReplicas": 2, "maxReplicas": 2},
    rollout={
        "groups": [
            {
                "components": ["engine", "decoder"],
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                "maintainRatio": {"tolerance": 25},
            }
        ]
    },
)

_PD_CANARY = {
    "components": ["engine", "decoder"],
    "canary": {
        "steps": [
            {"capacity": "25%", "traffic": 10, "pause": {}},
            {"capacity": "100%", "traffic": 100},
        ]
    },
}

# 004: canary.
MISTRAL_CANARY = with_spec(MISTRAL_PD, rollout={"groups": [_PD_CANARY]})

# 004: "The router can run a canary of its own at the same time, under groupOrdering: Concurrent".
MISTRAL_TWO_CANARIES = with_spec(
    MISTRAL_PD,
    rollout={
        "groupOrdering": "Concurrent",
        "groups": [
            _PD_CANARY,
            {"components": ["router"], "canary": {"steps": [{"capacity": 1, "traffic": 50}, {"capacity": "100%", "traffic": 100}]}},
        ],
    },
)

# 004: change the engine-decoder wire protocol from kv-v1 to kv-v2.
MISTRAL_KV_V1 = with_spec(MISTRAL_PD, rollout={"pairingProtocol": "kv-v1", "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]})
MISTRAL_KV_V2 = with_spec(MISTRAL_PD, rollout={"pairingProtocol": "kv-v2", "groups": [{"components": ["engine", "decoder"], "blueGreen": {}}]})

# 004: roll components one at a time (decoder, a 10m soak, then the engine).
MISTRAL_SEQUENCE = with_spec(
    MISTRAL_PD,
    rollout={"groups": [{"components": ["decoder"], "soak": "10m"}, {"components": ["engine"]}]},
)

EXAMPLES: list[tuple[str, Manifest, Manifest | None]] = [
    ("000-chat-capacity-factors", CHAT_CAPACITY_FACTORS, None),
    ("000-chat-factor-ratio", CHAT_FACTORS_RATIO, None),
    ("000-chat-factor-below-one", CHAT_FACTORS_SLOW, None),
    ("001-chat-omenative-tree", CHAT_OMENATIVE_TREE, None),
    ("001-chat-component-annotation", CHAT_ROUTER_ANNOTATION, None),
    ("003-qwen-spread", QWEN_SPREAD, None),
    ("003-qwen-nvlink-spread", QWEN_NVLINK, None),
    ("004-mistral-pd", MISTRAL_PD, None),
    ("004-mistral-rolling-update", MISTRAL_ROLLING, MISTRAL_PD),
    ("004-mistral-canary", MISTRAL_CANARY, MISTRAL_PD),
    ("004-mistral-two-canaries", MISTRAL_TWO_CANARIES, None),
    ("004-mistral-kv-v1", MISTRAL_KV_V1, MISTRAL_PD),
    ("004-mistral-kv-v1-to-v2", MISTRAL_KV_V2, MISTRAL_KV_V1),
    ("004-mistral-sequence", MISTRAL_SEQUENCE, MISTRAL_PD),
]
