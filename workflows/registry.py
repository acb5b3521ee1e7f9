"""Every workflow class the worker registers. Add a workflow here when you write it."""

from typing import Any

from workflows.instance import InstanceWorkflow

WORKFLOWS: list[type[Any]] = [InstanceWorkflow]
