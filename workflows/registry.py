"""Every workflow class the worker registers. Add a workflow here when you write it."""

from typing import Any

WORKFLOWS: list[type[Any]] = []
