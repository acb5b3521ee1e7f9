"""Admission rules for `spec.rollout`: groups, progressions, canaries, analysis, pairing.

Each rule names its reason code from the spec (reference §1.8, §2.8, §6 and the rollout
groups page). Interpretations where the spec names a code without its exact trigger:
- `OrphanCoordinationGroup`: a group names a component the InferenceService doesn't declare.
- `OrderNotHonored`: `groupOrdering: Concurrent` on groups that form a pure sequence, which
  OME always rolls out one at a time in list order.
- `ZeroBudgetPacingUnstartable`: a rolling update whose `maxSurge` and `maxUnavailable`
  both resolve to 0, so no Instance could ever move.

Public API: `check_rollout(new, old, findings, declared)`, `check_budget(value, field, findings)`,
`forms_sequence(groups)`, `parse_threshold(text)`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.admission_result import Findings
from models.duration import parse_duration
from models.inferenceservice import (
    COMPONENTS,
    MAX_CANARY_STEPS,
    MAX_ROLLOUT_GROUPS,
    CanaryAnalysis,
    ComponentName,
    GroupCanary,
    InferenceService,
    RolloutGroup,
)
from models.resolution import component_revision, declares_omenative_explicitly, explicit_mode_text

_PERCENT = re.compile(r"[0-9]+%")
_NUMERIC = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_UNIT_OF: dict[str, str] = {"router": "router", "engine": "engine+decoder", "decoder": "engine+decoder"}


def parse_threshold(text: str) -> float | None:
    """An analysis metric's threshold as a number, or None when it is not a plain decimal
    (`"0.01"`, `"5"`, `"1e-3"`); admission and the sample judge read it the same way."""
    stripped = text.strip()
    return float(stripped) if _NUMERIC.fullmatch(stripped) else None


def forms_sequence(groups: Sequence[RolloutGroup]) -> bool:
    """Two or more non-canary groups, each one component rolled out blue-green."""
    others = [g for g in groups if g.canary is None]
    return len(others) >= 2 and all(
        len(g.components) == 1 and g.progression == "blueGreen" and g.policy_ref is None
        for g in others
    )


def check_budget(value: int | str | None, field: str, findings: Findings) -> int | None:
    """A count or a whole percentage; returns the count (percent as 0-100 marker) or None."""
    if value is None:
        return None
    if isinstance(value, int):
        if value < 0:
            findings.deny(
                "InvalidRollingUpdateInteger", field,
                f"{field} must be a non-negative count, got {value}; use 0 or more",
            )
            return None
        return value
    if not _PERCENT.fullmatch(value) or int(value[:-1]) > 100:
        findings.deny(
            "InvalidRollingUpdatePercent", field,
            f'{field} must be a whole percentage from "0%" to "100%", or an unquoted count, got "{value}"',
        )
        return None
    return int(value[:-1])


def _check_components(
    index: int, group: RolloutGroup, declared: set[str], seen: dict[str, int], findings: Findings
) -> None:
    where = f"spec.rollout.groups[{index}]"
    canary = group.canary is not None
    if not 1 <= len(group.components) <= 3:
        findings.deny(
            "CanaryInvalid" if canary else "InvalidComponentInCoordinationGroup", f"{where}.components",
            f"{where}.components must list 1 to 3 of router, engine and decoder, got {len(group.components)}",
        )
    for position, name in enumerate(group.components):
        field = f"{where}.components[{position}]"
        if name not in COMPONENTS:
            findings.deny(
                "CanaryInvalid" if canary else "InvalidComponentInCoordinationGroup", field,
                f'{field}: "{name}" is not a component; use router, engine or decoder',
            )
            continue
        if name in seen:
            other = seen[name]
            where_else = "this group" if other == index else f"spec.rollout.groups[{other}]"
            findings.deny(
                "DuplicateComponentInCoordinationGroups", field,
                f'{field}: component "{name}" is already in {where_else}; a component can be in only one group',
            )
            continue
        seen[name] = index
        if name not in declared:
            findings.deny(
                "CanaryInvalid" if canary else "OrphanCoordinationGroup", field,
                f'{field}: component "{name}" is not declared in the InferenceService; '
                f"declare spec.{name} or remove it from the group",
            )


def _check_omenative(index: int, group: RolloutGroup, isvc: InferenceService, findings: Findings) -> None:
    reason = "CanaryRequiresOMENative" if group.canary is not None else "CoordinationRequiresOMENative"
    kind = "a canary group" if group.canary is not None else "a rollout group"
    for position, name in enumerate(group.components):
        if name not in COMPONENTS:
            continue
        component: ComponentName = name
        if declares_omenative_explicitly(isvc, component):
            continue
        field = f"spec.rollout.groups[{index}].components[{position}]"
        findings.deny(
            reason, field,
            f'{field}: component "{name}" in {kind} must declare OMENative explicitly '
            f'(deploymentMode="{explicit_mode_text(isvc, component)}"); set spec.deploymentMode: OMENative '
            f'or spec.{name}.annotations["ome.io/deploymentMode"]: OMENative; a leader, a worker or the '
            "runtime does not count",
        )


def _check_canary(index: int, group: RolloutGroup, canary: GroupCanary, declared: set[str], findings: Findings) -> None:
    where = f"spec.rollout.groups[{index}].canary"
    steps = canary.steps
    if not 1 <= len(steps) <= MAX_CANARY_STEPS:
        findings.deny("CanaryInvalid", f"{where}.steps",
                      f"{where}.steps must hold 1 to {MAX_CANARY_STEPS} steps, got {len(steps)}")
    previous_traffic = 0
    for position, step in enumerate(steps):
        field = f"{where}.steps[{position}]"
        last = position == len(steps) - 1
        capacity_is_zero = False
        if isinstance(step.capacity, int):
            if step.capacity < 0:
                findings.deny("CanaryInvalid", f"{field}.capacity",
                              f"{field}.capacity must be 0 or more, got {step.capacity}")
            capacity_is_zero = step.capacity == 0
        elif not _PERCENT.fullmatch(step.capacity) or int(step.capacity[:-1]) > 100:
            findings.deny("CanaryInvalid", f"{field}.capacity",
                          f'{field}.capacity must be a quoted whole percentage such as "25%" (0-100) '
                          f'or an unquoted count, got "{step.capacity}"')
        else:
            capacity_is_zero = step.capacity == "0%"
            if last and step.capacity != "100%":
                findings.deny("CanaryInvalid", f"{field}.capacity",
                              f'{field}.capacity must be "100%" at the last step, got "{step.capacity}"')
        if not 0 <= step.traffic <= 100:
            findings.deny("CanaryInvalid", f"{field}.traffic",
                          f"{field}.traffic must be from 0 to 100, got {step.traffic}")
        elif step.traffic < previous_traffic:
            findings.deny("CanaryInvalid", f"{field}.traffic",
                          f"{field}.traffic must not decrease across steps, got {step.traffic} after {previous_traffic}")
        if last and step.traffic != 100:
            findings.deny("CanaryInvalid", f"{field}.traffic",
                          f"{field}.traffic must be 100 at the last step, got {step.traffic}")
        if step.traffic > 0 and capacity_is_zero:
            findings.deny("CanaryInvalid", f"{field}.traffic",
                          f"{field}.traffic {step.traffic} needs capacity above 0; raise capacity or set traffic 0")
        if 0 <= step.traffic <= 100:
            # An out-of-range step is reported once, not again as a decrease at the next step.
            previous_traffic = max(previous_traffic, step.traffic)
        if step.pause is not None and step.pause.duration is not None and parse_duration(step.pause.duration) < 0:
            findings.deny("InvalidDuration", f"{field}.pause.duration",
                          f'{field}.pause.duration must not be negative, got "{step.pause.duration}"')
        if step.analysis is not None:
            _check_analysis(f"{field}.analysis", step.analysis, findings)
    if canary.ready_timeout is not None and parse_duration(canary.ready_timeout) <= 0:
        findings.deny("CanaryInvalid", f"{where}.readyTimeout",
                      f'{where}.readyTimeout must be greater than 0, got "{canary.ready_timeout}"')
    if canary.scale_down_delay_seconds is not None and canary.scale_down_delay_seconds < 0:
        findings.deny("CanaryInvalid", f"{where}.scaleDownDelaySeconds",
                      f"{where}.scaleDownDelaySeconds must be 0 or more, got {canary.scale_down_delay_seconds}")
    source = canary.prometheus
    if source is not None and source.provider_ref is not None and source.server_address is not None:
        findings.deny("CanaryInvalid", f"{where}.prometheus",
                      f"{where}.prometheus: at most one of providerRef and serverAddress may be set")
    if group.maintain_ratio is not None:
        findings.deny("CanaryInvalid", f"spec.rollout.groups[{index}].maintainRatio",
                      f"spec.rollout.groups[{index}].maintainRatio is not allowed on a canary group; "
                      "remove it (each step's capacity already applies to every component)")
    named = set(group.components)
    if "decoder" in named and "engine" not in named and "engine" not in declared:
        # The decoder serves only behind its engine; a canary of the decoder alone has no entrypoint.
        findings.deny("CanaryInvalid", f"spec.rollout.groups[{index}].components",
                      f'spec.rollout.groups[{index}].components: a canary group naming the decoder must include '
                      'its entrypoint Component "engine"; declare spec.engine and add it to the group')
    elif "engine" in declared and "decoder" in declared and len(named & {"engine", "decoder"}) == 1:
        findings.deny("CanaryInvalid", f"spec.rollout.groups[{index}].components",
                      f"spec.rollout.groups[{index}].components: the engine and the decoder are one canary "
                      "unit, so a canary group naming either must name both; add the other one")


def _check_analysis(where: str, analysis: CanaryAnalysis, findings: Findings) -> None:
    if parse_duration(analysis.interval) <= 0:
        findings.deny("AnalysisInvalid", f"{where}.interval", f"{where}: interval must be > 0")
    if analysis.initial_delay is not None and parse_duration(analysis.initial_delay) < 0:
        findings.deny("AnalysisInvalid", f"{where}.initialDelay",
                      f'{where}: initialDelay must not be negative, got "{analysis.initial_delay}"')
    if analysis.failure_limit < 1:
        findings.deny("AnalysisInvalid", f"{where}.failureLimit",
                      f"{where}: failureLimit must be at least 1, got {analysis.failure_limit}")
    if not 1 <= len(analysis.metrics) <= 10:
        findings.deny("AnalysisInvalid", f"{where}.metrics",
                      f"{where}: metrics must hold 1 to 10 entries, got {len(analysis.metrics)}")
    names: set[str] = set()
    for position, metric in enumerate(analysis.metrics):
        field = f"{where}.metrics[{position}]"
        if not metric.name:
            findings.deny("AnalysisInvalid", f"{field}.name", f"{field}.name must not be empty")
        elif metric.name in names:
            findings.deny("AnalysisInvalid", f"{field}.name",
                          f'{field}.name "{metric.name}" is used by another metric; names must be unique')
        names.add(metric.name)
        if not metric.query.strip():
            findings.deny("AnalysisInvalid", f"{field}.query", f'{field} ("{metric.name}"): query must not be empty')
        if parse_threshold(metric.threshold) is None:
            findings.deny("AnalysisInvalid", f"{field}.threshold",
                          f'{field} ("{metric.name}"): threshold "{metric.threshold}" must be numeric')


def _check_ordering(groups: Sequence[RolloutGroup], ordering: str, findings: Findings) -> None:
    sequence = forms_sequence(groups)
    canaries = [g for g in groups if g.canary is not None]
    if len(groups) >= 2 and ordering == "Sequential" and not (sequence and not canaries):
        findings.deny(
            "GroupOrderingNotHonored", "spec.rollout.groupOrdering",
            f"spec.rollout.groupOrdering: Sequential accepts one group or a sequence of single-component "
            f"blue-green groups alone, got {len(groups)} groups of another shape; "
            "set groupOrdering: Concurrent",
        )
    if ordering == "Concurrent" and sequence and not canaries:
        findings.deny(
            "OrderNotHonored", "spec.rollout.groupOrdering",
            "spec.rollout.groupOrdering: Concurrent cannot be honored: these groups form a sequence, which "
            "rolls out one group at a time in list order; set groupOrdering: Sequential or leave it out",
        )
    for index, group in enumerate(groups):
        if group.soak is None:
            continue
        field = f"spec.rollout.groups[{index}].soak"
        if group.canary is not None or not sequence:
            findings.deny(
                "SoakNotHonored", field,
                f'{field}: soak "{group.soak}" applies only to a sequence of single-component blue-green '
                "groups; remove it, or split the groups into such a sequence",
            )
        elif parse_duration(group.soak) < 0:
            findings.deny("InvalidDuration", field, f'{field} must not be negative, got "{group.soak}"')


def _check_pairing(new: InferenceService, old: InferenceService | None, declared: set[str], findings: Findings) -> None:
    if old is None or old.spec.rollout is None or new.spec.rollout is None:
        return
    before, after = old.spec.rollout.pairing_protocol, new.spec.rollout.pairing_protocol
    # Setting a token for the first time, or clearing it, is always accepted.
    if not before or not after or before == after or not {"engine", "decoder"} <= declared:
        return
    together = any(
        {"engine", "decoder"} <= set(g.components) and g.progression != "rollingUpdate"
        for g in new.spec.rollout.groups or []
    )
    if not together:
        findings.deny(
            "PairingProtocolChangeUncoordinated", "spec.rollout.pairingProtocol",
            f'spec.rollout.pairingProtocol: changing the token from "{before}" to "{after}" needs the engine and '
            "the decoder in one blue-green or canary group; add a group with components [engine, decoder]",
        )


def _check_lockstep(index: int, group: RolloutGroup, new: InferenceService, old: InferenceService | None,
                    findings: Findings) -> None:
    if old is None or group.rolling_update is None:
        return
    members: list[ComponentName] = [
        c for c in COMPONENTS
        if c in group.components and new.spec.component(c) is not None and old.spec.component(c) is not None
    ]
    changed = [c for c in members if component_revision(old, None, c) != component_revision(new, None, c)]
    if changed and len(changed) < len(members):
        unchanged = [c for c in members if c not in changed]
        findings.deny(
            "RollingUpdateLockstepViolation", f"spec.rollout.groups[{index}]",
            f"spec.rollout.groups[{index}]: a rolling-update group moves in lockstep, but this edit changes the "
            f"pods of {', '.join(changed)} and not of {', '.join(unchanged)}; change them together",
        )


def check_rollout(new: InferenceService, old: InferenceService | None, findings: Findings, declared: set[str]) -> None:
    """Every rule on `spec.rollout`; findings are added to `findings`."""
    rollout = new.spec.rollout
    if rollout is None:
        return
    groups = rollout.groups or []
    if len(groups) > MAX_ROLLOUT_GROUPS:
        findings.deny("TooManyRolloutGroups", "spec.rollout.groups",
                      f"spec.rollout.groups holds at most {MAX_ROLLOUT_GROUPS} groups, got {len(groups)}; merge some")
    seen: dict[str, int] = {}
    for index, group in enumerate(groups):
        where = f"spec.rollout.groups[{index}]"
        _check_components(index, group, declared, seen, findings)
        _check_omenative(index, group, new, findings)
        progressions = group.declared_progressions()
        if len(progressions) > 1:
            findings.deny("InvalidProgression", where,
                          f"{where} sets {', '.join(progressions)}; a group takes at most one progression")
        if group.policy_ref is not None and not progressions:
            findings.deny("RolloutPolicyRefUnsupported", f"{where}.policyRef",
                          f'{where}.policyRef "{group.policy_ref.name}" needs RolloutPolicy, which this build does '
                          "not support; write the progression inline (canary, blueGreen or rollingUpdate)")
        if group.canary is not None:
            _check_canary(index, group, group.canary, declared, findings)
        if group.rolling_update is not None:
            surge = check_budget(group.rolling_update.effective_max_surge, f"{where}.rollingUpdate.maxSurge", findings)
            unavailable = check_budget(
                group.rolling_update.effective_max_unavailable, f"{where}.rollingUpdate.maxUnavailable", findings
            )
            if surge == 0 and unavailable == 0:
                findings.deny("ZeroBudgetPacingUnstartable", f"{where}.rollingUpdate",
                              f"{where}.rollingUpdate: maxSurge and maxUnavailable are both 0, so no Instance "
                              "could ever move; raise one of them")
        if group.maintain_ratio is not None and group.canary is None:
            tolerance = group.maintain_ratio.effective_tolerance
            field = f"{where}.maintainRatio.tolerance"
            if not 0 <= tolerance <= 100:
                findings.deny("InvalidRatioTolerance", field, f"{field} must be from 0 to 100, got {tolerance}")
            elif tolerance > 50:
                findings.warn("RatioToleranceTooHigh", field,
                              f"{field} {tolerance} is above 50, so the ratio check is effectively off; "
                              "lower it to keep the components in step")
        _check_lockstep(index, group, new, old, findings)
    units: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        if group.canary is None:
            continue
        for unit in {_UNIT_OF[c] for c in group.components if c in _UNIT_OF}:
            units.setdefault(unit, []).append(index)
    for unit, indices in units.items():
        if len(indices) > 1:
            findings.deny("MultipleCanaryGroups", f"spec.rollout.groups[{indices[1]}].canary",
                          f"spec.rollout.groups[{indices[1]}].canary: the {unit} unit is already in the canary "
                          f"group spec.rollout.groups[{indices[0]}]; put it in one canary group")
    _check_ordering(groups, rollout.effective_group_ordering, findings)
    _check_pairing(new, old, declared, findings)
