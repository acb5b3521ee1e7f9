"""The pure parts of `omectl apply` (documents, namespaces, names, the kubeconfig it uses) and of
how an action's answer is printed and mapped to an exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workers.omectl import apply, sending
from workers.omectl.session import CommandFailed


def test_documents_skips_empty_ones_and_needs_kind_and_name(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text("---\nkind: Namespace\nmetadata: {name: a}\n---\n---\nkind: InferenceService\nmetadata: {name: b}\n")
    assert [doc["metadata"]["name"] for doc in apply.documents(str(path))] == ["a", "b"]
    path.write_text("kind: InferenceService\nmetadata: {}\n")
    with pytest.raises(CommandFailed, match="document 1 has no kind or metadata.name"):
        apply.documents(str(path))
    with pytest.raises(CommandFailed, match="-f .*missing.yaml"):
        apply.documents(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(
    ("doc", "namespace", "expected"),
    [
        ({"kind": "InferenceService", "metadata": {"name": "x"}}, "demo", "demo"),
        ({"kind": "InferenceService", "metadata": {"name": "x", "namespace": "own"}}, "demo", "own"),
        ({"kind": "ClusterServingRuntime", "metadata": {"name": "x"}}, "demo", None),
        ({"kind": "Namespace", "metadata": {"name": "x"}}, "demo", None),
        ({"kind": "ServingRuntime", "metadata": {"name": "x"}}, None, None),
    ],
    ids=["given", "kept", "cluster-scoped", "namespace", "no-flag"],
)
def test_dash_n_fills_only_a_missing_namespace(doc: dict[str, Any], namespace: str | None, expected: str | None) -> None:
    assert apply.in_namespace(doc, namespace)["metadata"].get("namespace") == expected


@pytest.mark.parametrize(
    ("doc", "shown"),
    [
        ({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "q"}}, "inferenceservice.ome.io/q"),
        ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d"}}, "namespace/d"),
    ],
)
def test_label_is_kubectls(doc: dict[str, Any], shown: str) -> None:
    assert apply.label(doc) == shown


def test_kubeconfig_falls_back_to_kubeconfig_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OME_KUBE__KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a:{tmp_path}/b")
    assert apply.kube_settings().kubeconfig == tmp_path / "a"
    monkeypatch.setenv("OME_KUBE__KUBECONFIG", str(tmp_path / "own"))
    assert apply.kube_settings().kubeconfig == tmp_path / "own"


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("promote accepted", "promote accepted"),
        ({"rows": [{"override_id": "u", "cluster": "c", "overrides": "1 -> 0"}]}, "override-id=u cluster=c overrides=1 -> 0"),
        ({"uuid": "u", "workflow_id": "w"}, '{"uuid": "u", "workflow_id": "w"}'),
        (None, "null"),
    ],
    ids=["text", "drain-rows", "json", "none"],
)
def test_answer_shown(answer: Any, shown: str) -> None:
    assert sending.shown(answer) == shown
