"""The TrafficMap's user-facing texts (spec reference §17-§21), quoted verbatim: the workflow,
its planning and the tests all read them from here.
"""

from __future__ import annotations

# --- conditions (§17) ---------------------------------------------------------------------
ROUTABLE = "Routable"
OVERRIDE_ACTIVE = "OverrideActive"
CAPACITY_FALLBACK = "CapacityFallback"
PUBLISHED = "Published"
PUBLICATION_FALLBACK = "PublicationFallback"

OVERRIDES_APPLIED = "OverridesApplied"
OVERRIDES_PENDING = "OverridesPending"
NO_OVERRIDES = "NoOverrides"

# --- Published reasons (§17, §21) ---------------------------------------------------------
REASON_PUBLISHED = "Published"
PUBLICATION_FALLBACK = "PublicationFallback"
WITHDRAWN = "Withdrawn"
INVALID_PLAN = "InvalidPlan"
CLAIM_REJECTED = "ClaimRejected"
APPLY_FAILED = "ApplyFailed"
INVALID_OWNER = "InvalidOwner"
FINALIZING = "Finalizing"
TRANSITIONING = "Transitioning"
PUBLISHER = "gatewayapi"
PUBLISHED_MESSAGE = f'TrafficMap is published by publisher "{PUBLISHER}"'
PUBLISHER_FAILED_LOG = "TrafficMap publisher reconciliation failed"

# --- what stops the map (§17 "Map stops updating") -----------------------------------------
VALIDATE_PREFIX = "validate routing policy: "
PARSE_DRAIN_PREFIX = "parse ome.io/traffic-drain: "

# --- drains (§20) -------------------------------------------------------------------------
DRAIN_NEEDS_CLUSTER = "traffic drain requires --workload-cluster; --cluster selects the Kubernetes API cluster"
NOT_ELIGIBLE = "traffic action refused: target is not eligible for cross-cluster traffic routing"
DRAIN_ID_EXISTS = "traffic drain refused: override ID already exists"
UNDRAIN_ID_MISSING = "traffic undrain refused: override ID does not exist"
ANNOTATION_MALFORMED = "traffic action refused: existing traffic-drain annotation is malformed or unsafe"
REFUSED = "TrafficActionRefused"
"""The `ApplicationError` type of a refused drain or undrain Update."""

# --- settings (§18, §21) ------------------------------------------------------------------
INVALID_CONFIGURATION = "invalid multi-cluster configuration"

# --- annotations and labels (§20, §21) ----------------------------------------------------
TRAFFIC_DRAIN_ANNOTATION = "ome.io/traffic-drain"
GLOBAL_HOST_ANNOTATION = "ome.io/global-host"
ENDPOINT_ISVC_LABEL = "ome.io/placement-endpoint-isvc"
CLUSTER_LABEL = "ome.io/placement-cluster"
FINALIZER = "ome.io/trafficmap-publisher"
