"""Whether an InferenceService object's spec still has to reach its workflow's `apply` Update.

The object's `metadata.generation` moves with every spec change (the API server counts them),
and `manifest_digest` says what the manifest asks for. A spec reaches the workflow once:
- the controller remembers, per object uid, the last (generation, digest) it relayed (or saw
  refused) in this process: only the last, since an annotation or label edit that returns to an
  earlier value (`ome.io/traffic-drain` set, then removed) brings back an earlier digest at the
  same generation, and that is a change to relay;
- across a restart it asks the workflow (`applied` query) what it holds, and sends nothing the
  workflow already applied from this or a newer generation with the same digest;
- the workflow dedups again by the Update ID `kube/{uid}/{generation}/{resourceVersion}` and
  answers a stale origin with `superseded`, so no order of events makes it go back. The ID names
  the object's write, not the digest: Temporal answers a repeated ID within a run with the first
  answer, so an ID made of the digest would turn the return to an earlier digest into a no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from planning.controller.objects import generation_of, identity, metadata_of, uid_of
from planning.service.relay import manifest_digest, relayed_manifest

SPEC_REJECTED = "SpecRejected"
"""Warning Event reason on the object when the workflow refuses its spec."""


@dataclass(frozen=True)
class SpecRelay:
    """What the `apply` Update carries for one object."""

    namespace: str
    name: str
    uid: str
    generation: int
    resource_version: str
    manifest: dict[str, Any]
    digest: str

    @property
    def handled_key(self) -> tuple[int, str]:
        return (self.generation, self.digest)

    @property
    def update_id(self) -> str:
        """Temporal dedups Updates of one ID within a run: a resend of the same object write
        after a lost answer is free, and every later write is a new ID."""
        return f"kube/{self.uid}/{self.generation}/{self.resource_version}"

    def origin(self) -> dict[str, Any]:
        """The `ApplyOrigin` of the manifest: the object it was read from."""
        return {"object_generation": self.generation, "uid": self.uid or None, "resource_version": self.resource_version or None}


def spec_relay(obj: dict[str, Any]) -> SpecRelay:
    manifest = relayed_manifest(obj)
    namespace, name = identity(obj)
    return SpecRelay(
        namespace=namespace,
        name=name,
        uid=uid_of(obj),
        generation=generation_of(obj),
        resource_version=str(metadata_of(obj).get("resourceVersion") or ""),
        manifest=manifest,
        digest=manifest_digest(manifest),
    )


@dataclass(frozen=True)
class AppliedFacts:
    """The workflow's `applied` query answer (`AppliedView`), for a running workflow."""

    generation: int
    object_generation: int
    digest: str
    deleting: bool = False

    @classmethod
    def from_view(cls, view: Any) -> AppliedFacts | None:
        """From the query's answer as a dict (or a model with those fields); None when unreadable."""
        fields = view if isinstance(view, dict) else getattr(view, "__dict__", None)
        if not isinstance(fields, dict):
            return None
        try:
            return cls(
                generation=int(fields.get("generation") or 0),
                object_generation=int(fields.get("object_generation") or 0),
                digest=str(fields.get("digest") or ""),
                deleting=bool(fields.get("deleting")),
            )
        except (TypeError, ValueError):
            return None


class SpecDecision(StrEnum):
    SEND = "send"
    SKIP = "skip"
    """The workflow holds this spec already (from this object generation or a newer one)."""
    WAIT = "wait"
    """The workflow is tearing an earlier object of this name down: it refuses any apply until
    it has completed; then a new run starts from this spec. Asked again after a back-off."""


def decide_spec(relay: SpecRelay, applied: AppliedFacts | None) -> SpecDecision:
    """`applied` is None when the workflow does not exist, is not running, or cannot answer."""
    if applied is None:
        return SpecDecision.SEND
    if applied.deleting:
        return SpecDecision.WAIT
    if relay.generation <= applied.object_generation and relay.digest == applied.digest:
        return SpecDecision.SKIP
    return SpecDecision.SEND
