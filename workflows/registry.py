"""Every workflow class the worker registers. Add a workflow here when you write it."""

from typing import Any

from workflows.inference_replica import InferenceReplicaWorkflow
from workflows.inference_service import InferenceServiceWorkflow
from workflows.instance import InstanceWorkflow

WORKFLOWS: list[type[Any]] = [InstanceWorkflow, InferenceReplicaWorkflow, InferenceServiceWorkflow]
