"""Rendering a metric's query template: every field, Go's whitespace, and each error (§2.3)."""

from __future__ import annotations

import pytest

from models.canary_analysis import TemplateFields
from planning.rollout.analysis.templating import FIELD_NAMES, TemplateError, render_query

pytestmark = pytest.mark.unit

FIELDS = TemplateFields(
    namespace="team-a", isvc_name="chat", component="engine", canary_revision="7c9e", stable_revision="5d2a"
)


@pytest.mark.parametrize(
    "template, rendered",
    [
        ("{{.Namespace}}", "team-a"),
        ("{{.ISVCName}}", "chat"),
        ("{{.Component}}", "engine"),
        ("{{.CanaryRevision}}", "7c9e"),
        ("{{.StableRevision}}", "5d2a"),
        ("{{.CanaryService}}", "chat-engine-rev-7c9e"),
        ("{{.StableService}}", "chat-engine-rev-5d2a"),
    ],
)
def test_each_field_renders_its_value(template: str, rendered: str) -> None:
    assert render_query(template, FIELDS) == rendered


def test_every_field_of_the_reference_is_covered() -> None:
    assert set(FIELD_NAMES) == {
        "Namespace", "ISVCName", "Component", "CanaryRevision", "StableRevision", "CanaryService", "StableService",
    }


@pytest.mark.parametrize(
    "template",
    ["{{ .Namespace }}", "{{.Namespace }}", "{{ .Namespace}}", "{{\t.Namespace\n}}", "{{   .Namespace   }}"],
    ids=["spaces", "space after", "space before", "tab and newline", "several spaces"],
)
def test_whitespace_inside_the_braces_is_allowed_as_in_go(template: str) -> None:
    assert render_query(template, FIELDS) == "team-a"


def test_a_real_error_ratio_query_renders_with_promql_braces_left_alone() -> None:
    template = (
        'sum(rate(requests_total{namespace="{{.Namespace}}",inferenceservice="{{ .ISVCName }}",'
        'revision_hash="{{.CanaryRevision}}",code=~"5.."}[5m])) / '
        'sum(rate(requests_total{namespace="{{.Namespace}}",revision_hash="{{.CanaryRevision}}"}[5m]))'
    )
    assert render_query(template, FIELDS) == (
        'sum(rate(requests_total{namespace="team-a",inferenceservice="chat",'
        'revision_hash="7c9e",code=~"5.."}[5m])) / '
        'sum(rate(requests_total{namespace="team-a",revision_hash="7c9e"}[5m]))'
    )


@pytest.mark.parametrize(
    "template",
    ["up", 'x{a="b"}', "x}}", "}} and }}", 'x{le=~"1{2}"}', "{ {.Namespace} }"],
    ids=["no action", "promql matcher", "lone closing braces", "two lone closings", "regex braces", "spaced braces"],
)
def test_text_without_an_action_is_copied_unchanged(template: str) -> None:
    assert render_query(template, FIELDS) == template


def test_a_closing_brace_right_after_an_action_stays_text() -> None:
    assert render_query('x{namespace="{{.Namespace}}"}', FIELDS) == 'x{namespace="team-a"}'


@pytest.mark.parametrize(
    "template, detail",
    [
        ("{{.Revision}}", "unknown field .Revision at offset 0"),
        ("{{.namespace}}", "unknown field .namespace"),
        ("{{.ISVCname}}", "unknown field .ISVCname"),
        ('x{a="{{.Namespace}}"} / {{.Nope}}', "unknown field .Nope at offset 24"),
    ],
    ids=["unknown", "wrong case", "misspelt", "second action"],
)
def test_an_unknown_field_is_a_template_error_listing_the_fields(template: str, detail: str) -> None:
    with pytest.raises(TemplateError) as raised:
        render_query(template, FIELDS)
    message = str(raised.value)
    assert message.startswith("template error: ")
    assert detail in message
    assert ".Namespace, .ISVCName, .Component, .CanaryRevision, .StableRevision, .CanaryService, .StableService" in (
        message
    )


@pytest.mark.parametrize(
    "template, detail",
    [
        ('x{a="{{.Namespace"}', "unclosed action at offset 5"),
        ("{{", "unclosed action at offset 0"),
        ("{{}}", "{{}} at offset 0 is not a field reference"),
        ("{{ }}", "{{ }} at offset 0 is not a field reference"),
        ("{{Namespace}}", "{{Namespace}} at offset 0 is not a field reference"),
        ("{{. Namespace}}", "is not a field reference"),
        ("{{.Namespace | printf}}", "is not a field reference"),
        ("{{- .Namespace -}}", "is not a field reference"),
        ("{{/* comment */}}", "is not a field reference"),
        ("{{{.Namespace}}", "is not a field reference"),
        ("{{.Namespace.Name}}", "is not a field reference"),
    ],
    ids=[
        "unclosed", "bare open", "empty", "blank", "no dot", "dot then space", "pipeline", "trim markers",
        "comment", "triple brace", "nested field",
    ],
)
def test_a_malformed_action_is_a_template_error(template: str, detail: str) -> None:
    with pytest.raises(TemplateError) as raised:
        render_query(template, FIELDS)
    assert str(raised.value).startswith("template error: ")
    assert detail in str(raised.value)
