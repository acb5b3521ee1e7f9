"""The alert rules of `deploy/prometheus/alerts.yml`, unit-tested by Prometheus's own
`promtool test rules` against `alerts_test.yml` (series laid out minute by minute, the alerts
expected at each evaluation, labels and annotations exactly), and every alert has such a test.

Without promtool the tests skip with the install hint, except under `CI=true`, where they fail
(as the Prometheus tests do: CI must not pass by running fewer tests).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.fixtures.prometheus import unavailable
from workers.prometheus import ALERT_RULES, INSTALL_HINT

ALERT_TESTS = ALERT_RULES.with_name("alerts_test.yml")
ALERTS = {
    "OmeInstanceFailed",
    "OmeRolloutHeldPastDeadline",
    "OmeCanaryRolledBack",
    "OmeDrainOverdue",
    "OmeWorkerNotPolling",
}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        unavailable(f"promtool is not installed (on Debian/Ubuntu: {INSTALL_HINT})")
    assert found is not None
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=ALERT_RULES.parent, capture_output=True, text=True, timeout=120)


def alert_names() -> set[str]:
    rules = yaml.safe_load(ALERT_RULES.read_text())
    return {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}


def test_the_rules_are_the_five_alerts_the_product_promises() -> None:
    assert alert_names() == ALERTS


def test_every_alert_is_unit_tested() -> None:
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    tested = {case["alertname"] for test in tests["tests"] for case in test.get("alert_rule_test", [])}
    assert alert_names() <= tested, f"alerts without a promtool test: {sorted(alert_names() - tested)}"
    assert tests["rule_files"] == [ALERT_RULES.name]


def test_promtool_checks_the_rules() -> None:
    checked = run_promtool("check", "rules", ALERT_RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


def test_promtool_unit_tests_pass() -> None:
    tested = run_promtool("test", "rules", ALERT_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_a_broken_expectation_fails_promtool(tmp_path: Path) -> None:
    """The unit tests can fail: an alert expected where none fires is reported."""
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    first = tests["tests"][0]["alert_rule_test"][0]
    assert first["exp_alerts"] == [], "the first case expects silence"
    first["exp_alerts"] = [{"exp_labels": {"severity": "warning"}}]
    tests["rule_files"] = [str(ALERT_RULES)]
    broken = tmp_path / "alerts_test.yml"
    broken.write_text(yaml.safe_dump(tests))
    result = run_promtool("test", "rules", str(broken))
    assert result.returncode != 0 and "FAILED" in result.stdout + result.stderr


@pytest.mark.parametrize("alert", sorted(ALERTS))
def test_each_alert_names_what_to_look_at(alert: str) -> None:
    rules = yaml.safe_load(ALERT_RULES.read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == alert]
    assert rule["labels"]["severity"] in ("warning", "critical")
    assert rule["annotations"]["summary"] and rule["annotations"]["description"]
