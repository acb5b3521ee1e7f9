"""The `Drain` workflow's user-facing texts: refusals of its input, the reasons it waits, and
its phases. Tests and code quote these, so each text exists once.

The reference gives no text for draining a node (OME drains nodes with `kubectl drain` and
migrations, §13); these are ours, shaped like the reference's: the field, the value, and
what to do.
"""

from __future__ import annotations

from enum import StrEnum

INVALID_INPUT = "InvalidDrainInput"
"""`ApplicationError.type` of a refused input; nothing was cordoned."""
NODE_NOT_FOUND = "NodeNotFound"


class DrainPhase(StrEnum):
    CORDONING = "Cordoning"
    MIGRATING = "Migrating"
    """Instances still run on the node (their migrations run, queue or back off); other pods
    are evicted meanwhile."""
    EVICTING = "Evicting"
    """Every Instance has left; the product's other pods are being evicted or terminating."""
    DRAINED = "Drained"
    """Nothing of the product runs on the node; it stays cordoned until `release`."""
    TIMED_OUT = "TimedOut"
    """The timeout passed first: nothing more moves; the node stays cordoned until `release`
    or `cancel`."""
    RELEASED = "Released"
    CANCELLED = "Cancelled"

    @property
    def holding(self) -> bool:
        """The node stays cordoned and the run waits for `release` or `cancel`."""
        return self in (DrainPhase.DRAINED, DrainPhase.TIMED_OUT)

    @property
    def final(self) -> bool:
        return self in (DrainPhase.RELEASED, DrainPhase.CANCELLED)


def node_required(node: object) -> str:
    return f'node must name the node to drain, got {node!r}; pass {{"node": "<name>"}} as `kubectl get nodes` lists it'


def node_malformed(node: str) -> str:
    return (
        f"node {node!r} is not a node name (a DNS-1123 subdomain: at most 253 lowercase letters, digits, "
        f"'-' and '.'); pass the name as `kubectl get nodes` lists it"
    )


def timeout_malformed(timeout: str, problem: str) -> str:
    return (
        f"timeout {timeout!r} {problem}; use a positive Go duration such as \"30m\" or \"1h30m\", "
        f"or leave timeout out to wait without limit"
    )


def node_not_found(node: str) -> str:
    return f"node {node!r} not found: nothing was cordoned; check the name with `kubectl get nodes`"


# --- why something waits (the `status` query's `waiting`) ----------------------------------


def queued_behind(running: str) -> str:
    return f"queued behind the migration of {running} (one migration per component at a time)"


def migration_failed(reason: str, message: str, retry_why: str) -> str:
    return f"migration failed ({reason}: {message}); {retry_why}"


def eviction_failed(message: str) -> str:
    return f"eviction failed ({message}); retried after a back-off: fix what refused it, or cancel the drain"


RELEASING = "release requested: no new migration or eviction starts"


RETRY_AFTER_BACKOFF = "retried after a back-off, as the Instance is still on the node"
RETRY_AFTER_WINDOW = "retried once the migration rate window has passed"
WAITING_FOR_CONTINUE_AS_NEW = "waiting for the migrations in flight to end before the run continues as new"
TERMINATING = "terminating"
MIGRATING = "migrating"
