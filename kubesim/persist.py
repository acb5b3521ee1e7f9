"""Saving and loading the cluster's objects, as etcd would keep them across an API server
restart: one JSON document written atomically (temp file, then rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kubesim.store import Store


def save(store: Store, path: str | Path) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kubesim-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(store.snapshot(), handle, separators=(",", ":"))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | Path) -> dict[str, Any] | None:
    """The saved document, or None when there is no state yet."""
    target = Path(path)
    if not target.exists() or target.stat().st_size == 0:
        return None
    with target.open() as handle:
        data = json.load(handle)
    if not isinstance(data, dict) or "objects" not in data:
        raise ValueError(f"state file {target} is not a kubesim state document (no 'objects' key); "
                         "delete it to start a fresh cluster")
    return data
