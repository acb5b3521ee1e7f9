"""Helpers to build admission cases: a spec page manifest with edits at dotted paths."""

from __future__ import annotations

import copy
from typing import Any

from tests.unit.models.spec_examples import MISTRAL_PD

DELETE = object()


def edit(base: dict[str, Any] | None = None, /, **changes: Any) -> dict[str, Any]:
    """`edit(MISTRAL_PD, spec__engine__minReplicas=3)`: a copy with `__`-separated paths set.

    A value of `DELETE` removes the key. Starts from the page-004 `mistral-pd` manifest.
    """
    manifest = copy.deepcopy(base if base is not None else MISTRAL_PD)
    for dotted, value in changes.items():
        keys = dotted.split("__")
        node = manifest
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        if value is DELETE:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = copy.deepcopy(value)
    return manifest


def groups(*items: dict[str, Any], ordering: str | None = None, base: dict[str, Any] | None = None,
           **rollout: Any) -> dict[str, Any]:
    """MISTRAL_PD (or `base`) with `spec.rollout` replaced by these groups."""
    spec_rollout: dict[str, Any] = {"groups": list(items), **rollout}
    if ordering is not None:
        spec_rollout["groupOrdering"] = ordering
    return edit(base, spec__rollout=spec_rollout)


def canary(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"steps": list(steps), **extra}


def analysis(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "interval": "1m",
        "failureLimit": 2,
        "metrics": [{"name": "error-rate", "query": "sum(rate(errors[1m]))", "operator": "LT", "threshold": "0.01"}],
    }
    body.update(overrides)
    return body


PD = ["engine", "decoder"]
LAST = {"capacity": "100%", "traffic": 100}
