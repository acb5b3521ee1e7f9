"""The layering in ARCHITECTURE.md is enforced, not just written down.

import-linter's contracts (pyproject.toml) must break when a module crosses a layer, so each
probe below is planted in a copy of the packages and must be reported. The environment rule
(only `workers/` reads it) is not an import, so an AST scan checks it.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "planning", "workflows", "activities", "workers", "kubesim")
LINT_IMPORTS = Path(sys.prefix) / "bin" / "lint-imports"

# Each probe: (module path in the copy, its source, the contract that must report it).
PROBES = [
    (
        "workflows/layering_probe.py",
        "import kubernetes\n",
        "workflows do no I/O and call activities only by name",
        "workflows.layering_probe -> kubernetes",
    ),
    (
        "models/layering_probe.py",
        "import temporalio.workflow\n",
        "models and planning are pure: no Temporal, no I/O",
        "models.layering_probe -> temporalio",
    ),
    (
        "planning/layering_probe.py",
        "import httpx\n",
        "models and planning are pure: no Temporal, no I/O",
        "planning.layering_probe -> httpx",
    ),
    (
        "activities/layering_probe.py",
        "from workflows import names\n",
        "activities never import workflows",
        "activities.layering_probe -> workflows",
    ),
]


@pytest.fixture(scope="module")
def lint_output_with_probes(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """lint-imports run once over a copy of the packages with every probe planted."""
    copy = tmp_path_factory.mktemp("layering")
    for package in PACKAGES:
        shutil.copytree(REPO_ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", copy / "pyproject.toml")
    for path, source, _, _ in PROBES:
        (copy / path).write_text(source)
    # PYTHONPATH first, so the copy shadows the editable install of the real tree.
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=copy, env=env, capture_output=True, text=True, timeout=120
    )


def test_contracts_fail_on_layer_crossings(lint_output_with_probes: subprocess.CompletedProcess[str]) -> None:
    output = lint_output_with_probes.stdout + lint_output_with_probes.stderr
    assert lint_output_with_probes.returncode != 0, output


@pytest.mark.parametrize(("path", "source", "contract", "import_line"), PROBES, ids=[p[0] for p in PROBES])
def test_each_crossing_is_reported_under_its_contract(
    lint_output_with_probes: subprocess.CompletedProcess[str],
    path: str,
    source: str,
    contract: str,
    import_line: str,
) -> None:
    output = lint_output_with_probes.stdout
    assert f"{contract} BROKEN" in output, output
    assert import_line in output, output


def _environment_reads(source: str) -> list[int]:
    """Line numbers that read the process environment (os.environ, os.getenv, os.putenv...)."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "environb", "getenv", "getenvb"}:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(alias.name in {"environ", "environb", "getenv", "getenvb"} for alias in node.names):
                lines.append(node.lineno)
    return lines


def test_the_scan_sees_environment_reads() -> None:
    assert _environment_reads("import os\nx = os.environ['A']\ny = os.getenv('B')\n") == [2, 3]
    assert _environment_reads("from os import environ\n") == [1]
    assert _environment_reads("import os\nos.path.join('a', 'b')\n") == []


@pytest.mark.parametrize("package", ["models", "planning", "workflows", "activities"])
def test_only_workers_read_the_environment(package: str) -> None:
    offenders = {
        str(path.relative_to(REPO_ROOT)): lines
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        if (lines := _environment_reads(path.read_text()))
    }
    assert offenders == {}, f"read settings in workers/config.py and pass them in instead: {offenders}"
