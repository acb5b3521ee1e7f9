"""deploy/examples/invalid/: each manifest is refused for its one reason, as its README says.

Every file is admitted as a CREATE (no old object) with the runtime it names
(deploy/examples/srt-qwen3-0-6b.yaml) and without one; both refuse it with exactly the reason
its name spells, and the webhook's answer for it carries the README's message word for word.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.admission import admit
from models.runtime import ClusterServingRuntime, ServingRuntimeSpec
from workers.webhook_review import review

INVALID = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "invalid"
RUNTIME_FILE = INVALID.parent / "srt-qwen3-0-6b.yaml"
MIN_REASONS = 20
ROW = re.compile(r"^\| `(?P<file>[^`]+)` \| `(?P<reason>[^`]+)` \| (?P<message>.*) \|$")
FILES = sorted(INVALID.glob("*.yaml"))


def _runtime() -> ServingRuntimeSpec:
    return ClusterServingRuntime.model_validate(yaml.safe_load(RUNTIME_FILE.read_text())).spec


def _manifest(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def _readme_rows() -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for line in (INVALID / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            assert match["file"] not in rows, f"README lists {match['file']} twice"
            rows[match["file"]] = (match["reason"], match["message"].replace("\\|", "|"))
    return rows


def _file_name(reason: str) -> str:
    """`ZeroBudgetPacingUnstartable` -> `zero-budget-pacing-unstartable.yaml`."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z][a-z]*", reason.replace("OMENative", "OmeNative"))
    return "-".join(word.lower() for word in words) + ".yaml"


def test_there_is_a_file_for_at_least_twenty_reasons() -> None:
    reasons = {reason for reason, _ in _readme_rows().values()}
    assert len(reasons) >= MIN_REASONS, sorted(reasons)
    assert len(reasons) == len(FILES), "one file per reason"


def test_the_readme_lists_every_file_and_only_those() -> None:
    assert set(_readme_rows()) == {path.name for path in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_each_file_is_refused_for_exactly_its_reason(path: Path) -> None:
    reason, message = _readme_rows()[path.name]
    assert path.name == _file_name(reason), "a file is named after its reason"
    text = path.read_text()
    assert text.startswith("# ") and reason in text.split("\napiVersion:")[0], (
        "the leading comment says what is wrong and names the reason"
    )
    manifest = _manifest(path)
    assert manifest["metadata"]["namespace"] == "invalid-demo"
    assert manifest["spec"]["runtime"]["name"] == yaml.safe_load(RUNTIME_FILE.read_text())["metadata"]["name"]
    for runtime in (_runtime(), None):
        admission = admit(manifest, runtime=runtime)
        assert not admission.allowed
        assert admission.reasons == [reason], [finding.message for finding in admission.denials]
        assert [finding.message for finding in admission.denials] == [message]


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_the_webhook_answers_each_file_with_the_readmes_message(path: Path) -> None:
    manifest = _manifest(path)
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": "CREATE",
            "resource": {"group": "ome.io", "version": "v1beta1", "resource": "inferenceservices"},
            "namespace": manifest["metadata"]["namespace"],
            "object": manifest,
        },
    }
    response = review(body, lambda namespace, name: _runtime())["response"]
    assert response["allowed"] is False
    assert response["status"] == {"code": 403, "reason": "Forbidden", "message": _readme_rows()[path.name][1]}
