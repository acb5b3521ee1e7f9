"""A component's update strategy and the budgets it allows (spec reference §7 [US]).

- `SurgeThenDrain` (the default) reads `maxSurge`: an update first adds the new pods, so
  the budget counts surge slots. `RecreatePod`, `InPlaceIfPossible` and `InPlaceOnly` read
  `maxUnavailable`: an update takes the Instance out of service, so the budget counts
  Instances that don't serve.
- Budgets are an int or a percentage of the desired Instances, percentages rounded up as
  the reference states for both budgets ("budgets int or percent rounded up"), so a small
  component always gets at least one move out of a non-zero percentage.
- No budget means every Instance may move at once. Both set to zero is refused by
  admission; a strategy whose own budget is zero simply never starts a move.
- Precedence: InferenceService, then the runtime (already field-merged into the effective
  component), then the cluster-wide default (`ome.controller.updateStrategy`), then
  `SurgeThenDrain` with no budget.
- `partition` keeps that many of the lowest-index Instances on the old revision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from models.inferenceservice import LifecycleSpec
from models.instance import UpdateStrategyType
from models.quantity import scaled_value_from_int_or_percent

SURGE_STRATEGIES = frozenset({UpdateStrategyType.SURGE_THEN_DRAIN})


class BudgetError(ValueError):
    """A budget value that is neither a whole number nor a percentage."""


@dataclass(frozen=True)
class UpdatePolicy:
    """The update settings of one component, after every default has been applied."""

    strategy: UpdateStrategyType = UpdateStrategyType.SURGE_THEN_DRAIN
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None
    partition: int = 0
    min_ready_seconds: float = 0.0

    @property
    def surges(self) -> bool:
        return self.strategy in SURGE_STRATEGIES


CHART_DEFAULT_POLICY = UpdatePolicy(max_surge="25%", max_unavailable="25%")
"""`ome.controller.updateStrategy` as the chart sets it: 25% for both budgets."""


def update_policy(
    lifecycle: LifecycleSpec | None,
    cluster_default: UpdatePolicy | None = None,
) -> UpdatePolicy:
    """The effective policy: the component's lifecycle block over the cluster default.

    The chart's maxUnavailable does not apply to SurgeThenDrain (§7 "none for
    SurgeThenDrain"); a maxUnavailable the user sets still counts for the Ready minimum.
    """
    base = cluster_default or UpdatePolicy()
    strategy_spec = lifecycle.update_strategy if lifecycle is not None else None
    budget = strategy_spec.rolling_update if strategy_spec is not None else None
    strategy = (
        UpdateStrategyType(strategy_spec.type)
        if strategy_spec is not None and strategy_spec.type is not None
        else base.strategy
    )
    max_surge = budget.max_surge if budget is not None and budget.max_surge is not None else base.max_surge
    if budget is not None and budget.max_unavailable is not None:
        max_unavailable: int | str | None = budget.max_unavailable
    elif strategy in SURGE_STRATEGIES:
        max_unavailable = None
    else:
        max_unavailable = base.max_unavailable
    partition = budget.partition if budget is not None and budget.partition is not None else base.partition
    min_ready = (
        float(lifecycle.min_ready_seconds)
        if lifecycle is not None and lifecycle.min_ready_seconds is not None
        else base.min_ready_seconds
    )
    return replace(
        base,
        strategy=strategy,
        max_surge=max_surge,
        max_unavailable=max_unavailable,
        partition=max(0, partition),
        min_ready_seconds=max(0.0, min_ready),
    )


def resolve_budget(value: int | str | None, desired: int, field: str) -> int | None:
    """A budget as a number of Instances; None when unset (no budget: all may move)."""
    if value is None:
        return None
    try:
        resolved = scaled_value_from_int_or_percent(value, desired, round_up=True)
    except ValueError as error:
        raise BudgetError(
            f'{field} must be a whole number or a percentage such as "25%", got {value!r} ({error})'
        ) from None
    return max(0, resolved)


def surge_budget(policy: UpdatePolicy, desired: int) -> int | None:
    return resolve_budget(policy.max_surge, desired, "lifecycle.updateStrategy.rollingUpdate.maxSurge")


def unavailable_budget(policy: UpdatePolicy, desired: int) -> int | None:
    return resolve_budget(
        policy.max_unavailable, desired, "lifecycle.updateStrategy.rollingUpdate.maxUnavailable"
    )


def minimum_serving(policy: UpdatePolicy, desired: int) -> int:
    """§8: minimum = desired − maxUnavailable, or every desired Instance when it is unset."""
    budget = unavailable_budget(policy, desired)
    if budget is None:
        return desired
    return max(0, desired - budget)
