"""Base classes shared by every resource model.

`SpecModel` is for what users write (InferenceService, ServingRuntime): camelCase on the
wire, snake_case in Python, unknown fields rejected with their path, and no type coercion
(the API server would refuse `minReplicas: "2"`, so do we). `StatusModel` is for what we
write ourselves (status blocks, InferenceReplica, TrafficMap): the same wire names, but it
accepts the lax inputs that arrive from JSON payloads (timestamps as strings).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SpecModel(BaseModel):
    """A user-facing manifest fragment: strict, camelCase, closed to unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
    )

    def to_manifest(self) -> dict[str, Any]:
        """The object as a user would write it: wire names, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class StatusModel(BaseModel):
    """A model the product writes: camelCase, closed, but lax about input types."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
    )

    def to_manifest(self) -> dict[str, Any]:
        """The object in its wire form, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class MessageModel(BaseModel):
    """A workflow's message (input, carried state, signal payload, query answer): field names
    as users type them in `temporal workflow signal --input`, closed to unknown fields so a
    misspelt one is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")
