"""The recorded traffic weight, as `status.components.<primary>.traffic[]` shows it (spec
reference §1.7).

The weight is recorded, not routed: requests go to every ready Instance whatever its
revision, so the new revision's real share is about its share of ready Instances. Each
entry names the revision `<isvc>-<component>-rev-<hash>`, its `percent` (entries of weight 0
are left out), its `tag` (`canary` or `stable`), `latestRevision` (true for the new one) and
the `pairingProtocol` token when the rollout sets one. Once the canary completes, the new
revision is the stable one and takes every share.
"""

from __future__ import annotations

from typing import cast

from models.inferenceservice import ComponentName
from models.isvc_status import TrafficTarget
from models.resolution import revision_name


def traffic_targets(
    isvc: str,
    component: str,
    canary_revision: str,
    stable_revision: str | None,
    weight: int,
    pairing_protocol: str | None = None,
    completed: bool = False,
) -> list[TrafficTarget]:
    """The canary's and the stable revision's recorded shares (`weight` is the canary's)."""
    name = cast(ComponentName, component)
    if completed or stable_revision is None:
        return [
            TrafficTarget(
                revision_name=revision_name(isvc, name, canary_revision),
                percent=100,
                tag="stable",
                latest_revision=True,
                pairing_protocol=pairing_protocol,
            )
        ]
    weight = max(0, min(100, weight))
    entries = [
        TrafficTarget(
            revision_name=revision_name(isvc, name, canary_revision),
            percent=weight,
            tag="canary",
            latest_revision=True,
            pairing_protocol=pairing_protocol,
        ),
        TrafficTarget(
            revision_name=revision_name(isvc, name, stable_revision),
            percent=100 - weight,
            tag="stable",
            latest_revision=False,
            pairing_protocol=pairing_protocol,
        ),
    ]
    return [entry for entry in entries if entry.percent > 0]
