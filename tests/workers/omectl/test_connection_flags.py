"""The printed `temporal` line carries the TLS and API-key flags `OME_TEMPORAL__*` set (flag
names of `temporal options`), the API key as the variable's reference, never its value."""

from __future__ import annotations

import shlex
from pathlib import Path

from typer.testing import CliRunner

from workers.config import TemporalSettings
from workers.omectl.app import app
from workers.omectl.sending import connection_flags

SECRET = "key-do-not-print"


def test_no_flags_without_tls_or_key() -> None:
    assert connection_flags(TemporalSettings()) == ""


def test_dry_run_line_has_tls_flags_and_the_key_reference(tmp_path: Path) -> None:
    for name in ("c.pem", "k.pem", "ca.pem"):
        (tmp_path / name).write_text("-")
    env = {
        "OME_OTEL__OTLP_ENDPOINT": None,
        "OME_TEMPORAL__ADDRESS": "ns.tmprl.cloud:7233",
        "OME_TEMPORAL__TLS_CERT": str(tmp_path / "c.pem"),
        "OME_TEMPORAL__TLS_KEY": str(tmp_path / "k.pem"),
        "OME_TEMPORAL__TLS_CA": str(tmp_path / "ca.pem"),
        "OME_TEMPORAL__TLS_SERVER_NAME": "ns.tmprl.cloud",
        "OME_TEMPORAL__API_KEY": SECRET,
    }
    result = CliRunner().invoke(app, ["promote", "chat", "-n", "prod", "--dry-run"], env=env)
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("temporal: "))
    words = shlex.split(line.removeprefix("temporal: "))  # as the shell reads it, the key unexpanded here
    assert words[words.index("--address") + 1 :] == [
        "ns.tmprl.cloud:7233", "--tls",
        "--tls-cert-path", str(tmp_path / "c.pem"), "--tls-key-path", str(tmp_path / "k.pem"),
        "--tls-ca-path", str(tmp_path / "ca.pem"), "--tls-server-name", "ns.tmprl.cloud",
        "--api-key", "$OME_TEMPORAL__API_KEY",
    ]
    assert line.endswith(' --api-key "$OME_TEMPORAL__API_KEY"')
