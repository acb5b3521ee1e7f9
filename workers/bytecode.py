"""The product's bytecode: which packages `make bytecode` compiles, and which workflow modules
lack it.

The SDK's workflow sandbox imports the workflow modules afresh for every workflow run it starts;
without their compiled bytecode (PYTHONDONTWRITEBYTECODE set, a read-only checkout) that is a
compile of each module every time, about a third of the cost of starting a run. `python -m
workers.bytecode [extra packages]` compiles the product's packages once (compileall rewrites only
what changed); `make up`, `make test` and the bench run it, and the worker warns at start when
`uncompiled_workflow_modules` names any.
"""

from __future__ import annotations

import compileall
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path

import workflows

ROOT = Path(workflows.__file__).resolve().parent.parent
PACKAGES = ("models", "planning", "workflows", "activities", "workers", "kubesim")


def compile_packages(extra: Iterable[str] = ()) -> bool:
    """Compile `PACKAGES` and `extra` (names of top-level packages in the checkout); whether
    every module compiled."""
    return all(compileall.compile_dir(ROOT / name, quiet=1) for name in (*PACKAGES, *extra))


def uncompiled_workflow_modules(root: Path | None = None) -> list[str]:
    """Source files of the `workflows` package (or `root`) without bytecode as new as they are:
    the sandbox re-imports those modules for every workflow run, compiling each that has none."""
    root = root or Path(workflows.__file__).parent
    stale = []
    for source in sorted(root.rglob("*.py")):
        compiled = Path(importlib.util.cache_from_source(str(source)))
        if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
            stale.append(str(source.relative_to(root.parent)))
    return stale


if __name__ == "__main__":
    sys.exit(0 if compile_packages(sys.argv[1:]) else 1)
