"""Every workflow class the worker registers. Add a workflow here when you write it."""

from typing import Any

from workflows.drain.workflow import DrainWorkflow
from workflows.instance.workflow import InstanceWorkflow
from workflows.migration.workflow import MigrationWorkflow
from workflows.replica.workflow import InferenceReplicaWorkflow
from workflows.rollout.workflow import RolloutWorkflow
from workflows.service.workflow import InferenceServiceWorkflow
from workflows.trafficmap.workflow import TrafficMapWorkflow

WORKFLOWS: list[type[Any]] = [
    InstanceWorkflow,
    InferenceReplicaWorkflow,
    InferenceServiceWorkflow,
    RolloutWorkflow,
    MigrationWorkflow,
    DrainWorkflow,
    TrafficMapWorkflow,
]
