"""`workers.bytecode.uncompiled_workflow_modules`: the worker warns at start when the sandbox would
compile workflow modules for every run (no bytecode, or bytecode older than the source)."""

from __future__ import annotations

import os
import py_compile
from pathlib import Path

from workers.bytecode import uncompiled_workflow_modules


def test_modules_without_fresh_bytecode_are_named(tmp_path: Path) -> None:
    package = tmp_path / "flows"
    (package / "inner").mkdir(parents=True)
    compiled, never, edited = package / "a.py", package / "inner" / "b.py", package / "c.py"
    for source in (compiled, never, edited):
        source.write_text("X = 1\n")
    py_compile.compile(str(compiled))
    py_compile.compile(str(edited))
    later = edited.stat().st_mtime + 10
    os.utime(edited, (later, later))  # edited after it was compiled

    assert uncompiled_workflow_modules(package) == ["flows/c.py", "flows/inner/b.py"]


def test_a_package_compiled_after_its_last_edit_is_not_named(tmp_path: Path) -> None:
    package = tmp_path / "flows"
    package.mkdir()
    (package / "a.py").write_text("X = 1\n")
    py_compile.compile(str(package / "a.py"))
    assert uncompiled_workflow_modules(package) == []
