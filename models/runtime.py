"""ServingRuntime and ClusterServingRuntime (`ome.io/v1beta1`).

A runtime's `engineConfig`, `decoderConfig` and `routerConfig` use the InferenceService's
component shape (`ComponentSpec`); their values are defaults that the InferenceService's
values override field by field (see `models.resolution.effective_component`).

Public API: `ServingRuntimeSpec` (`.component_config(name)`), `ServingRuntime`,
`ClusterServingRuntime`, `RuntimeModelFormat`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictStr

from models.base import SpecModel
from models.inferenceservice import ComponentName, ComponentSpec, ObjectMeta


class RuntimeModelFormat(SpecModel):
    """One entry of `supportedModelFormats`; OME matches models to runtimes with these."""

    model_config = ConfigDict(extra="allow")

    name: StrictStr | None = None
    version: StrictStr | None = None
    auto_select: StrictBool | None = None
    priority: int | None = None


class ServingRuntimeSpec(SpecModel):
    """The runtime's spec. Only the component configs feed the lifecycle; OME's many other
    runtime fields (model matching, protocol versions) are kept as written, so a catalog
    runtime validates without our modelling every one of them."""

    model_config = ConfigDict(extra="allow")

    disabled: StrictBool | None = None
    supported_model_formats: list[RuntimeModelFormat] | None = None
    scheduler_name: StrictStr | None = None
    engine_config: ComponentSpec | None = None
    decoder_config: ComponentSpec | None = None
    router_config: ComponentSpec | None = None

    def component_config(self, name: ComponentName) -> ComponentSpec | None:
        config: ComponentSpec | None = getattr(self, f"{name}_config")
        return config


class _Runtime(SpecModel):
    """What the namespaced and the cluster-wide runtime share; only `kind` tells them apart."""

    api_version: Literal["ome.io/v1beta1"] = "ome.io/v1beta1"
    kind: str
    metadata: ObjectMeta
    spec: ServingRuntimeSpec = Field(default_factory=ServingRuntimeSpec)
    status: dict[str, Any] | None = None


class ServingRuntime(_Runtime):
    kind: Literal["ServingRuntime"] = "ServingRuntime"


class ClusterServingRuntime(_Runtime):
    kind: Literal["ClusterServingRuntime"] = "ClusterServingRuntime"
