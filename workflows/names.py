"""Stable names that users type: workflow types, workflow IDs, the task queue.

Names are the user interface (`temporal workflow start --type ...`), so they live in one
place and never change once released.
"""

TASK_QUEUE = "ome-lifecycle"


def home_suffix(cluster: str | None) -> str:
    """`@{cluster}` for an object served from a workload cluster (reference §16), else nothing.

    A multi-cluster InferenceService runs the same workflows in each home cluster; their IDs
    gain the cluster so that `worker-a`'s Instance 0 and `worker-b`'s are two workflows."""
    return f"@{cluster}" if cluster else ""


def cluster_task_queue(task_queue: str, cluster: str | None) -> str:
    """The queue whose worker talks to `cluster`'s API: `ome-lifecycle@worker-a`."""
    return f"{task_queue}{home_suffix(cluster)}"


INFERENCE_SERVICE = "InferenceService"
INFERENCE_REPLICA = "InferenceReplica"
INSTANCE = "Instance"


def isvc_workflow_id(namespace: str, name: str, cluster: str | None = None) -> str:
    """`isvc/{ns}/{name}`; a home's member copy is `isvc/{ns}/{name}@{cluster}`."""
    return f"isvc/{namespace}/{name}{home_suffix(cluster)}"


def irep_workflow_id(namespace: str, isvc: str, component: str, cluster: str | None = None) -> str:
    return f"irep/{namespace}/{isvc}-{component}{home_suffix(cluster)}"


def instance_workflow_id(namespace: str, isvc: str, component: str, index: int, cluster: str | None = None) -> str:
    return f"instance/{namespace}/{isvc}-{component}-{index}{home_suffix(cluster)}"


ROLLOUT = "Rollout"


def rollout_workflow_id(namespace: str, isvc: str, run: int, cluster: str | None = None) -> str:
    """`rollout/{ns}/{isvc}/{run}`: the run is the generation that opened it."""
    return f"rollout/{namespace}/{isvc}{home_suffix(cluster)}/{run}"


MIGRATION = "Migration"


def migration_workflow_id(
    namespace: str, isvc: str, component: str, index: int, request: str, cluster: str | None = None
) -> str:
    """`migration/{ns}/{isvc}-{component}-{index}/{request}`: the request is its uuid."""
    return f"migration/{namespace}/{isvc}-{component}-{index}{home_suffix(cluster)}/{request}"


DRAIN = "Drain"


def drain_workflow_id(node: str) -> str:
    """`drain/node/{node}`: one drain per node at a time."""
    return f"drain/node/{node}"


TRAFFIC_MAP = "TrafficMap"


def trafficmap_workflow_id(namespace: str, isvc: str) -> str:
    """`trafficmap/{ns}/{isvc}`: one per routed multi-cluster InferenceService."""
    return f"trafficmap/{namespace}/{isvc}"
