"""Operator requests the canary accepted and has not yet applied: its mailbox (spec reference
§3.1, §3.2, §5).

OME keeps requests as annotations (`ome.io/rollout-promote`, `-rollback`, `-resume`); we keep
them in the canary's state. `steering` puts an accepted request here; the machine consumes
it when it can act (not while globally paused: requests wait). A rollback request lingers,
like the annotation, until a different target revision appears or a retry takes it away,
so while it is present other requests are refused with the mailbox text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromoteRequest:
    revision: str
    """The canary revision hash it promotes (filled in from the state when the caller named none)."""
    override_analysis: bool = False
    """`--override-analysis`: passes an Analysis gate, bypassing warm-up, sampling and bake."""
    request_id: str = ""
    """Recorded as `promotedThrough` when applied; a request with that ID again is inert."""


@dataclass(frozen=True)
class RollbackRequest:
    request_id: str = ""


@dataclass(frozen=True)
class RetryRequest:
    revision: str
    """A canary revision hash of the group (a component's own or the primary's)."""
    request_id: str = ""


@dataclass(frozen=True)
class Mailbox:
    promote: PromoteRequest | None = None
    rollback: RollbackRequest | None = None
    retry: RetryRequest | None = None

    @property
    def blocks(self) -> bool:
        """A promote or rollback is present: other promote/rollback/pause/repin requests refuse."""
        return self.promote is not None or self.rollback is not None
