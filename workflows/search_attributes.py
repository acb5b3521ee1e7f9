"""Search attributes the product registers, so operators can filter workflows in the UI/CLI.

`temporal workflow list --query 'InferenceService="chat" AND OmePhase="Failed"'`
"""

from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    SearchAttributeUpdate,
    TypedSearchAttributes,
)

INFERENCE_SERVICE = SearchAttributeKey.for_keyword("InferenceService")
COMPONENT = SearchAttributeKey.for_keyword("OmeComponent")
PHASE = SearchAttributeKey.for_keyword("OmePhase")

ALL = (INFERENCE_SERVICE, COMPONENT, PHASE)


def dev_server_flags() -> list[str]:
    """`--search-attribute NAME=Keyword` flags for `temporal server start-dev`."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}=Keyword"]
    return flags


def instance_attributes(isvc: str, component: str, phase: str) -> list[SearchAttributeUpdate[str]]:
    """What an Instance is found by: its InferenceService, component and phase."""
    return [INFERENCE_SERVICE.value_set(isvc), COMPONENT.value_set(component), PHASE.value_set(phase)]


def at_start(updates: list[SearchAttributeUpdate[str]]) -> TypedSearchAttributes:
    """`updates` as a workflow start's search attributes: set from its first event, no upsert."""
    return TypedSearchAttributes([SearchAttributePair(update.key, update.value) for update in updates if update.value is not None])


def missing(updates: list[SearchAttributeUpdate[str]], current: TypedSearchAttributes) -> list[SearchAttributeUpdate[str]]:
    """The `updates` whose value `current` does not hold yet."""
    return [update for update in updates if current.get(update.key) != update.value]
