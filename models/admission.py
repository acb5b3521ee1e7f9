"""Admission of an InferenceService: what the spec's validating webhook accepts.

`admit(new, old=None, runtime=None) -> Admission` takes the raw manifest (a dict, as a user
passes it to `temporal workflow start --input`) or a parsed `InferenceService`, and the
previous accepted version for update rules. It never raises on user input: shape errors,
unknown fields and every rule below become denials with the field path, a message that
names the value and the fix, and the reason in parentheses.

Rules here: metadata (DNS-1123 names, `ome.io/rollout-ready-timeout`, migration request
annotations), components (replica bounds, worker size, deployment-mode annotations, update
budgets), placement, routing (capacity factors must be positive, probe and capacity poll
settings). Rollout rules live in `models.admission_rollout`; shape errors in
`models.admission_schema`. With `runtime`, components the runtime declares count as
declared; without it only those the InferenceService declares do.

Public API: `admit`, and re-exported `Admission`, `Finding`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from models.admission_result import Admission, Finding, Findings
from models.admission_rollout import check_budget, check_rollout
from models.admission_routing import check_capacity_poll, check_probe
from models.admission_schema import parse_manifest
from models.duration import parse_duration
from models.inferenceservice import (
    COMPONENTS,
    DEPLOYMENT_MODE_ANNOTATION,
    InferenceService,
    LifecycleSpec,
    PlacementSpec,
    RoutingSpec,
)
from models.migration import request_problems
from models.quantity import Quantity
from models.resolution import MULTINODE_NOT_RUN, multinode_message
from models.runtime import ServingRuntimeSpec

__all__ = ["Admission", "Finding", "admit"]

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
READY_TIMEOUT_ANNOTATION = "ome.io/rollout-ready-timeout"
MIGRATION_REQUEST_PREFIX = "ome.io/migration-request-v1-"
_MODES = ("OMENative", "RawDeployment", "MultiNode")


def admit(
    new: dict[str, Any] | InferenceService,
    old: dict[str, Any] | InferenceService | None = None,
    runtime: ServingRuntimeSpec | None = None,
) -> Admission:
    """Accept or refuse `new` (replacing `old`, if given), as the spec's webhook does."""
    isvc, findings = parse_manifest(new)
    if isvc is None:
        return Admission(allowed=False, denials=findings.denials, warnings=findings.warnings)
    previous: InferenceService | None = None
    if old is not None:
        # The old object was accepted once; if it no longer parses, update rules skip it.
        previous, _ = parse_manifest(old)
    try:
        _check(isvc, previous, runtime, findings)
    except (ValueError, ArithmeticError) as error:
        # A rule met a value no earlier check anticipated: refuse rather than crash the caller.
        findings.deny("FieldValueInvalid", "spec", f"spec could not be validated: {error}")
    return Admission(
        allowed=not findings.denials, denials=findings.denials, warnings=findings.warnings, isvc=isvc
    )


def _check(
    isvc: InferenceService, old: InferenceService | None, runtime: ServingRuntimeSpec | None, findings: Findings
) -> None:
    declared: set[str] = {c for c in COMPONENTS if isvc.spec.component(c) is not None}
    if runtime is not None:
        declared |= {c for c in COMPONENTS if runtime.component_config(c) is not None}
    _check_metadata(isvc, findings)
    _check_components(isvc, findings)
    if isvc.spec.placement is not None or (old is not None and old.spec.placement is not None):
        _check_placement(isvc.spec.placement, old.spec.placement if old is not None else None, findings)
    if isvc.spec.routing is not None:
        _check_routing(isvc.spec.routing, findings)
    check_rollout(isvc, old, findings, declared)


def _check_metadata(isvc: InferenceService, findings: Findings) -> None:
    meta = isvc.metadata
    if len(meta.name) > 63 or not _DNS1123_LABEL.fullmatch(meta.name):
        findings.deny("InvalidName", "metadata.name",
                      f'metadata.name "{meta.name}" must be a DNS-1123 label: at most 63 lowercase letters, '
                      "digits and '-', starting and ending with a letter or digit")
    if meta.namespace is not None and (len(meta.namespace) > 63 or not _DNS1123_LABEL.fullmatch(meta.namespace)):
        findings.deny("InvalidName", "metadata.namespace",
                      f'metadata.namespace "{meta.namespace}" must be a DNS-1123 label')
    annotations = meta.annotations or {}
    timeout = annotations.get(READY_TIMEOUT_ANNOTATION)
    if timeout is not None:
        field = f'metadata.annotations["{READY_TIMEOUT_ANNOTATION}"]'
        try:
            seconds = parse_duration(timeout)
        except ValueError as error:
            findings.deny("InvalidDuration", field, f"{field}: {error}")
        else:
            # Zero or negative is ignored by OME; a positive value under a minute is a likely slip.
            if 0 < seconds < 60:
                findings.warn("RolloutTimeoutTooShort", field,
                              f'{field} "{timeout}" is under 1m, so a canary step may fail before its Instances '
                              "are ready; use a longer timeout")
    for key, value in annotations.items():
        if key.startswith(MIGRATION_REQUEST_PREFIX):
            _check_migration_request(key, value, findings)


def _check_migration_request(key: str, value: str, findings: Findings) -> None:
    field = f'metadata.annotations["{key}"]'
    try:
        request = json.loads(value)
    except ValueError:
        findings.deny("InvalidMigrationRequest", field, f"migration request {key} is not JSON: {value[:80]!r}")
        return
    problems = request_problems(request)
    if problems:
        findings.deny("InvalidMigrationRequest", field, f"migration request {key}: {'; '.join(problems)}")


def _check_components(isvc: InferenceService, findings: Findings) -> None:
    for name in COMPONENTS:
        spec = isvc.spec.component(name)
        if spec is None:
            continue
        where = f"spec.{name}"
        for field_name, value in (("minReplicas", spec.min_replicas), ("maxReplicas", spec.max_replicas)):
            if value is not None and value < 0:
                findings.deny("InvalidReplicas", f"{where}.{field_name}",
                              f"{where}.{field_name} must be 0 or more, got {value}")
        if (spec.min_replicas is not None and spec.max_replicas is not None
                and spec.max_replicas > 0 and spec.min_replicas > spec.max_replicas):
            findings.deny("InvalidReplicas", f"{where}.minReplicas",
                          f"{where}.minReplicas ({spec.min_replicas}) must not exceed maxReplicas "
                          f"({spec.max_replicas}); raise maxReplicas or lower minReplicas")
        if spec.worker is not None and spec.worker.size is not None and spec.worker.size < 1:
            findings.deny("InvalidWorkerSize", f"{where}.worker.size",
                          f"{where}.worker.size must be at least 1, got {spec.worker.size}")
        mode = (spec.annotations or {}).get(DEPLOYMENT_MODE_ANNOTATION)
        field = f'{where}.annotations["{DEPLOYMENT_MODE_ANNOTATION}"]'
        if mode is not None and mode not in _MODES:
            findings.deny("InvalidDeploymentMode", field,
                          f'{field} must be OMENative, RawDeployment or MultiNode, got "{mode}"')
        elif mode == "MultiNode" and name == "router":
            findings.deny("InvalidDeploymentMode", field,
                          f"{field}: MultiNode runs only an engine or a decoder; use OMENative or RawDeployment")
        elif mode == "MultiNode":
            findings.warn(MULTINODE_NOT_RUN, field, multinode_message(name))
        _check_lifecycle(where, spec.lifecycle, findings)


def _check_lifecycle(where: str, lifecycle: LifecycleSpec | None, findings: Findings) -> None:
    if lifecycle is None:
        return
    if lifecycle.min_ready_seconds is not None and lifecycle.min_ready_seconds < 0:
        findings.deny("InvalidLifecycle", f"{where}.lifecycle.minReadySeconds",
                      f"{where}.lifecycle.minReadySeconds must be 0 or more, got {lifecycle.min_ready_seconds}")
    strategy = lifecycle.update_strategy
    if strategy is None or strategy.rolling_update is None:
        return
    budget = strategy.rolling_update
    field = f"{where}.lifecycle.updateStrategy.rollingUpdate"
    if budget.partition is not None and budget.partition < 0:
        findings.deny("InvalidRollingUpdateInteger", f"{field}.partition",
                      f"{field}.partition must be 0 or more, got {budget.partition}")
    surge = check_budget(budget.max_surge, f"{field}.maxSurge", findings)
    unavailable = check_budget(budget.max_unavailable, f"{field}.maxUnavailable", findings)
    if surge == 0 and unavailable == 0:
        findings.deny("ZeroBudgetPacingUnstartable", field,
                      f"{field}: maxSurge and maxUnavailable are both 0, so no Instance could ever update; "
                      "raise one of them")


def _check_placement(placement: PlacementSpec | None, old: PlacementSpec | None, findings: Findings) -> None:
    if old is not None and old.policy == "ClusterAffinity" and (placement is None or placement.policy != "ClusterAffinity"):
        findings.deny("InvalidPlacement", "spec.placement.policy",
                      "spec.placement.policy: ClusterAffinity cannot be removed once set; keep policy: ClusterAffinity")
    if placement is None:
        return
    affinity = placement.policy == "ClusterAffinity"
    if affinity and placement.mode is None:
        findings.deny("InvalidPlacement", "spec.placement.mode",
                      "spec.placement.mode is required with policy: ClusterAffinity; set Single, All, Split or "
                      "SplitByCapacity")
    uses_affinity_features = (placement.cluster_affinity is not None or placement.max_surge is not None
                              or placement.replacement_timeout is not None or placement.mode == "SplitByCapacity")
    if not affinity and uses_affinity_features:
        findings.deny("InvalidPlacement", "spec.placement.policy",
                      "spec.placement: clusterAffinity, maxSurge, replacementTimeout, and SplitByCapacity require "
                      "spec.placement.policy: ClusterAffinity")
    terms = placement.cluster_affinity
    if terms is not None and not 1 <= len(terms) <= 64:
        findings.deny("InvalidPlacement", "spec.placement.clusterAffinity",
                      f"spec.placement.clusterAffinity must hold 1 to 64 terms, got {len(terms)}; "
                      "leave it out to select every registered cluster")
    for index, term in enumerate(terms or []):
        for kind, requirements in (("matchFields", term.match_fields), ("matchExpressions", term.match_expressions)):
            for position, requirement in enumerate(requirements or []):
                field = f"spec.placement.clusterAffinity[{index}].{kind}[{position}]"
                needs_values = requirement.operator in ("In", "NotIn")
                if needs_values and not requirement.values:
                    findings.deny("InvalidPlacement", f"{field}.values",
                                  f"{field}: operator {requirement.operator} needs at least one value")
                if not needs_values and requirement.values:
                    findings.deny("InvalidPlacement", f"{field}.values",
                                  f"{field}: operator {requirement.operator} takes no values; remove them")
    if placement.max_surge is not None and placement.max_surge < 0:
        findings.deny("InvalidPlacement", "spec.placement.maxSurge",
                      f"spec.placement.maxSurge must be 0 or more, got {placement.max_surge}")
    if placement.replacement_timeout is not None:
        if not (affinity and placement.mode == "Single"):
            findings.deny("InvalidPlacement", "spec.placement.replacementTimeout",
                          "spec.placement.replacementTimeout applies only to policy: ClusterAffinity with "
                          "mode: Single; remove it")
        elif parse_duration(placement.replacement_timeout) <= 0:
            findings.deny("InvalidPlacement", "spec.placement.replacementTimeout",
                          f'spec.placement.replacementTimeout must be positive, got "{placement.replacement_timeout}"')
    split = placement.split
    if split is not None:
        if affinity and placement.mode not in ("Split", "SplitByCapacity"):
            findings.deny("InvalidPlacement", "spec.placement.split",
                          f"spec.placement.split applies only to mode Split or SplitByCapacity, got {placement.mode}")
        if split.replicas is not None and split.replicas < 1:
            findings.deny("InvalidPlacement", "spec.placement.split.replicas",
                          f"spec.placement.split.replicas must be at least 1, got {split.replicas}")
        if split.max_replicas_per_cluster is not None and split.max_replicas_per_cluster < 0:
            findings.deny("InvalidPlacement", "spec.placement.split.maxReplicasPerCluster",
                          "spec.placement.split.maxReplicasPerCluster must be 0 (no ceiling) or more, "
                          f"got {split.max_replicas_per_cluster}")


def _check_routing(routing: RoutingSpec, findings: Findings) -> None:
    for cluster, factor in (routing.capacity_factors or {}).items():
        field = f'spec.routing.capacityFactors["{cluster}"]'
        if not _DNS1123_SUBDOMAIN.fullmatch(cluster) or len(cluster) > 253:
            findings.deny("InvalidRoutingPolicy", field,
                          f"{field}: the key must be a WorkloadCluster name (a DNS-1123 subdomain)")
        if Quantity.parse(factor).sign() <= 0:
            # OME accepts this and later stops updating the TrafficMap; refusing it up front
            # keeps the map current and shows the user the error where they made it.
            findings.deny("InvalidRoutingPolicy", field, f'{field} must be positive, got "{factor}"')
    if routing.probe is not None:
        check_probe(routing.probe, findings)
    if routing.capacity is not None:
        check_capacity_poll(routing.capacity, findings)
