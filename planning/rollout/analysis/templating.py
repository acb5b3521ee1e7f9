"""Render a metric's query template (spec reference §2.3).

OME renders queries with Go's text/template over a struct of seven fields; users write
`{{.Namespace}}` or `{{ .Namespace }}`. We support exactly that subset: an action is `{{`,
optional whitespace, `.` and a field name, optional whitespace, `}}`. Text outside actions is
copied unchanged (a lone `}}` is text, as in Go, which matters for PromQL's `{...}` matchers).
Anything else inside an action (a pipeline, a function, a comment, trim markers) or an
unclosed `{{` is a template error, as is an unknown field: Go reports those for a struct too.

A `TemplateError`'s message starts with `template error:` because that prefix is how
`metricResults` tells a template error from a query error (§2.6).
"""

from __future__ import annotations

import re

from models.canary_analysis import TemplateFields

TEMPLATE_ERROR_PREFIX = "template error:"

FIELD_NAMES = (
    "Namespace",
    "ISVCName",
    "Component",
    "CanaryRevision",
    "StableRevision",
    "CanaryService",
    "StableService",
)

_OPEN = "{{"
_CLOSE = "}}"
# Go's whitespace inside actions: space, tab, carriage return, newline.
_FIELD_ACTION = re.compile(r"[ \t\r\n]*\.([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*")
_FIELD_LIST = ", ".join("." + name for name in FIELD_NAMES)


class TemplateError(ValueError):
    """A query template that cannot render; the message starts with `template error:`."""


def revision_service(isvc_name: str, component: str, revision: str) -> str:
    """`<isvc>-<component>-rev-<hash>`: a revision's name in status and in queries."""
    return f"{isvc_name}-{component}-rev-{revision}"


def field_values(fields: TemplateFields) -> dict[str, str]:
    """Each template field's value, by its Go name."""
    return {
        "Namespace": fields.namespace,
        "ISVCName": fields.isvc_name,
        "Component": fields.component,
        "CanaryRevision": fields.canary_revision,
        "StableRevision": fields.stable_revision,
        "CanaryService": revision_service(fields.isvc_name, fields.component, fields.canary_revision),
        "StableService": revision_service(fields.isvc_name, fields.component, fields.stable_revision),
    }


def _error(detail: str) -> TemplateError:
    return TemplateError(f"{TEMPLATE_ERROR_PREFIX} {detail}")


def render_query(template: str, fields: TemplateFields) -> str:
    """The query with every `{{.Field}}` replaced; `TemplateError` when it does not render."""
    values = field_values(fields)
    rendered: list[str] = []
    position = 0
    while True:
        start = template.find(_OPEN, position)
        if start < 0:
            rendered.append(template[position:])
            return "".join(rendered)
        end = template.find(_CLOSE, start + len(_OPEN))
        if end < 0:
            raise _error(
                f"unclosed action at offset {start}: {template[start:start + 30]!r} has no closing "
                f'"}}}}"; close it or remove the "{{{{"'
            )
        action = template[start + len(_OPEN):end]
        match = _FIELD_ACTION.fullmatch(action)
        if match is None:
            raise _error(
                f"{{{{{action}}}}} at offset {start} is not a field reference; a query template "
                f"supports only fields such as {{{{.Namespace}}}} ({_FIELD_LIST})"
            )
        name = match.group(1)
        if name not in values:
            raise _error(f"unknown field .{name} at offset {start}; use one of {_FIELD_LIST}")
        rendered.append(template[position:start])
        rendered.append(values[name])
        position = end + len(_CLOSE)
