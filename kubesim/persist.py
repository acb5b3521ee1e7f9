"""Saving and loading the cluster's objects, as etcd would keep them across an API server
restart: one JSON document written atomically (temp file, then rename).

Encoding goes through orjson (`kubesim.fastjson`): the standard library's `json.dump` to a file
takes its pure-Python path, 1.45 s for the 26 MB of a 1,600-pod cluster against 0.13 s, and
the autosave runs it on the event loop every few seconds while anything changes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from kubesim import fastjson
from kubesim.store import Store


def encode(store: Store) -> bytes:
    """The store's objects as the state document; on the event loop, so they are consistent."""
    return fastjson.dumps(store.snapshot())


def write(document: bytes, path: str | Path) -> None:
    """Replace the state file with `document` atomically; safe to run in a thread."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kubesim-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(document)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | Path) -> dict[str, Any] | None:
    """The saved document, or None when there is no state yet."""
    target = Path(path)
    if not target.exists() or target.stat().st_size == 0:
        return None
    data = fastjson.loads(target.read_bytes())
    if not isinstance(data, dict) or "objects" not in data:
        raise ValueError(f"state file {target} is not a kubesim state document (no 'objects' key); "
                         "delete it to start a fresh cluster")
    return data
