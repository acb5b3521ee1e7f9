"""Stable names that users type: workflow types, workflow IDs, the task queue.

Names are the user interface (`temporal workflow start --type ...`), so they live in one
place and never change once released.
"""

TASK_QUEUE = "ome-lifecycle"

INFERENCE_SERVICE = "InferenceService"
INFERENCE_REPLICA = "InferenceReplica"
INSTANCE = "Instance"


def isvc_workflow_id(namespace: str, name: str) -> str:
    return f"isvc/{namespace}/{name}"


def irep_workflow_id(namespace: str, isvc: str, component: str) -> str:
    return f"irep/{namespace}/{isvc}-{component}"


def instance_workflow_id(namespace: str, isvc: str, component: str, index: int) -> str:
    return f"instance/{namespace}/{isvc}-{component}-{index}"


ROLLOUT = "Rollout"


def rollout_workflow_id(namespace: str, isvc: str, run: int) -> str:
    """`rollout/{ns}/{isvc}/{run}`: the run is the generation that opened it."""
    return f"rollout/{namespace}/{isvc}/{run}"


MIGRATION = "Migration"


def migration_workflow_id(namespace: str, isvc: str, component: str, index: int, request: str) -> str:
    """`migration/{ns}/{isvc}-{component}-{index}/{request}`: the request is its uuid."""
    return f"migration/{namespace}/{isvc}-{component}-{index}/{request}"


DRAIN = "Drain"


def drain_workflow_id(node: str) -> str:
    """`drain/node/{node}`: one drain per node at a time."""
    return f"drain/node/{node}"
