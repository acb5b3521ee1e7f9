"""The `Drain` workflow's state: one model, carried through continue-as-new.

`DrainState` holds the node, the deadline, one `InstanceMove` per Instance seen on the node
and one `PodEviction` per other product pod being evicted, plus what the last look at the
node found. The functions in `planning.drain.progress` return new states; the workflow only
stores them.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from planning.drain.texts import DrainPhase


class InstanceKey(BaseModel):
    """One OMENative Instance, as its pods' labels name it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    isvc: str
    component: str
    index: int

    @property
    def label(self) -> str:
        """`ns/isvc-component-index`, as the Instance workflow's ID ends."""
        return f"{self.namespace}/{self.isvc}-{self.component}-{self.index}"

    @property
    def component_label(self) -> str:
        return f"{self.namespace}/{self.isvc}-{self.component}"


class InstanceMove(BaseModel):
    """One Instance on the node and its migrations."""

    model_config = ConfigDict(extra="forbid")

    instance: InstanceKey
    pods: list[str] = Field(default_factory=list)
    """Its live pods on the node at the last look."""
    on_node: bool = True
    attempts: int = 0
    """Migrations started for it."""
    migration_id: str | None = None
    """The workflow ID of the migration in flight; None between migrations."""
    retry_at: datetime | None = None
    """No new migration before this (the back-off after one that ended with the Instance still here)."""
    retry_why: str = ""
    last_reason: str | None = None
    last_message: str = ""
    moved_to: int | None = None
    """The replacement's index, from the last Completed migration."""


class PodEviction(BaseModel):
    """One of the product's other pods on the node, evicted through the Eviction API."""

    model_config = ConfigDict(extra="forbid")

    namespace: str
    name: str
    uid: str
    attempts: int = 0
    blocked: str = ""
    """`blocked by PDB <name>: <message>` from the last attempt; '' when not blocked."""
    retry_at: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class DrainState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node: str
    reason: str = ""
    timeout: str | None = None
    started_at: datetime | None = None
    deadline: datetime | None = None
    phase: DrainPhase = DrainPhase.CORDONING
    cordoned: bool = False
    """We set `spec.unschedulable` (and have not lifted it)."""
    instances: dict[str, InstanceMove] = Field(default_factory=dict)
    """By `InstanceKey.label`; Instances that left the node stay (`on_node` False) to be reported."""
    evictions: dict[str, PodEviction] = Field(default_factory=dict)
    """By `ns/name`; a pod leaves this map once it has left the node."""
    evicted: list[str] = Field(default_factory=list)
    pods_left: list[str] = Field(default_factory=list)
    """The product's pods on the node at the last look (`ns/name`), terminating ones included."""
    pods_stuck: list[str] = Field(default_factory=list)
    """Of `pods_left`: pods terminating on a node that is not Ready. Their kubelet cannot
    confirm the end, so they stay Terminating until the node returns or is removed; they
    serve nothing and do not keep the drain from finishing."""
    pods_ignored: list[str] = Field(default_factory=list)
    """Pods not of the product (left alone, like DaemonSet pods under `kubectl drain`)."""
    observed_at: datetime | None = None
    release_requested: bool = False
    cancel_requested: bool = False
    migrations_started: int = 0
