"""Search attributes the product registers, so operators can filter workflows in the UI/CLI.

`temporal workflow list --query 'InferenceService="chat" AND OmePhase="Failed"'`
"""

from temporalio.common import SearchAttributeKey

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
