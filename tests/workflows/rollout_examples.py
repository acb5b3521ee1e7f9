"""Seed 004's mistral-pd example as the rollout tests run it: the example's prefill-decode
runtime as a namespaced ServingRuntime on one test image without GPUs, and the
InferenceService in a test's own namespace with a given `spec.rollout`, image and counts."""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests.unit.deploy_usage import EXAMPLES
from tests.workflows.service_harness import IMAGE_1

NAME, NAMESPACE = "mistral-pd", "mistral-demo"
BLUE_GREEN: dict[str, Any] = {"groups": [{"components": ["engine", "decoder"]}]}


def pd_runtime() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / "srt-mistral-7b-instruct-pd.yaml").read_text())
    loaded["kind"] = "ServingRuntime"
    for key in ("routerConfig", "engineConfig", "decoderConfig"):
        runner = loaded["spec"][key]["runner"]
        runner.pop("resources", None)
        runner["image"] = IMAGE_1
    return loaded


def pd_manifest(
    namespace: str, rollout: dict[str, Any], image: str | None = None, replicas: tuple[int, int] = (1, 1)
) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EXAMPLES / "mistral-pd.json").read_text())
    loaded["metadata"]["namespace"] = namespace
    spec = loaded["spec"]
    spec["rollout"] = rollout
    for component, count in zip(("engine", "decoder"), replicas, strict=True):
        spec[component] = {"minReplicas": count, "maxReplicas": count}
        if image is not None:
            spec[component]["runner"] = {"image": image}
    return loaded
