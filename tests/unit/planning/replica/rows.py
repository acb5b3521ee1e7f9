"""Compact constructors for InstanceFacts rows in InferenceReplica planning tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from models.instance import InstancePhase, UpdateStrategyType
from planning.replica.facts import InstanceFacts, SurgeSlots

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
OLD = "chat-engine-rev-aaaaaaaa"
NEW = "chat-engine-rev-bbbbbbbb"


def ready(index: int, revision: str = OLD, serving_for: float = 3600.0, **extra: object) -> InstanceFacts:
    """A Ready Instance serving `revision` since `serving_for` seconds ago."""
    fields: dict[str, object] = {
        "index": index,
        "phase": InstancePhase.READY,
        "running_revision": revision,
        "target_revision": revision,
        "ready": True,
        "serving": True,
        "serving_since": NOW - timedelta(seconds=serving_for),
    }
    fields.update(extra)
    return InstanceFacts(**fields)  # type: ignore[arg-type]


def failed(index: int, revision: str | None = OLD, **extra: object) -> InstanceFacts:
    fields: dict[str, object] = {
        "index": index,
        "phase": InstancePhase.FAILED,
        "running_revision": revision,
        "target_revision": revision,
    }
    fields.update(extra)
    return InstanceFacts(**fields)  # type: ignore[arg-type]


def creating(index: int, revision: str = OLD, **extra: object) -> InstanceFacts:
    fields: dict[str, object] = {
        "index": index,
        "phase": InstancePhase.CREATING,
        "target_revision": revision,
        "operation": "Create",
    }
    fields.update(extra)
    return InstanceFacts(**fields)  # type: ignore[arg-type]


def updating(
    index: int,
    target: str = NEW,
    strategy: UpdateStrategyType = UpdateStrategyType.SURGE_THEN_DRAIN,
    serving: bool = True,
    **extra: object,
) -> InstanceFacts:
    fields: dict[str, object] = {
        "index": index,
        "phase": InstancePhase.UPDATING,
        "running_revision": OLD,
        "target_revision": target,
        "ready": serving,
        "serving": serving,
        "serving_since": NOW - timedelta(hours=1) if serving else None,
        "operation": "Update",
        "operation_strategy": strategy,
    }
    fields.update(extra)
    return InstanceFacts(**fields)  # type: ignore[arg-type]


def deleting(index: int, revision: str = OLD) -> InstanceFacts:
    return InstanceFacts(
        index=index,
        phase=InstancePhase.DELETING,
        running_revision=revision,
        target_revision=revision,
        operation="Delete",
    )


def with_slots(row: InstanceFacts, slots: int, explanation: str = "") -> InstanceFacts:
    from dataclasses import replace

    return replace(row, surge=SurgeSlots(slots=slots, explanation=explanation))
