"""The `make up` runner's checks before it starts anything, and the banner it prints after."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from workers.config import Settings, StackSettings
from workers.stack import EXAMPLE_RUNTIME, EXAMPLE_SPEC, Stack, run_stack

REPO_ROOT = Path(__file__).resolve().parents[2]


async def test_the_stack_refuses_a_busy_port_and_names_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        settings = Settings(stack=StackSettings(data_dir=tmp_path, frontend_port=port))
        assert await run_stack(settings) == 1
    output = capsys.readouterr().out
    assert f"127.0.0.1:{port} is already in use" in output
    assert "OME_STACK__FRONTEND_PORT" in output


def test_the_banner_walks_through_the_shipped_example() -> None:
    banner = Stack(Settings()).banner()
    assert banner.startswith("Local stack is up.")
    assert "http://127.0.0.1:8233" in banner
    assert (REPO_ROOT / EXAMPLE_RUNTIME).is_file() and (REPO_ROOT / EXAMPLE_SPEC).is_file()
    assert f"--update-input-file {EXAMPLE_SPEC}" in banner
    # The CLI's default address is the stack's, so the commands carry no --address.
    assert "--address" not in banner


def test_on_other_ports_every_cli_command_names_the_address(tmp_path: Path) -> None:
    banner = Stack(
        Settings(stack=StackSettings(data_dir=tmp_path, frontend_port=17233, ui_port=18233))
    ).banner()
    assert "http://127.0.0.1:18233" in banner
    commands = [line for line in banner.splitlines() if re.search(r"bin/temporal .*workflow ", line)]
    assert len(commands) == 3
    assert all("--address 127.0.0.1:17233" in command for command in commands)


def test_make_up_runs_this_runner_and_ci_runs_make_test() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = re.search(r"^up: .*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert recipe and recipe.group(1).strip() == "$(BIN)/python -m workers.stack"
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert [line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))] == [
        "make test"
    ]
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme.index("make up") < readme.index("make test") < readme.index("## What runs")
