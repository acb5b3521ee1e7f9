"""API errors and the Kubernetes `Status` objects the server answers them with.

Every failure kubesim reports on the wire is a `Status` (kind Status, apiVersion v1) with the
same `reason` strings a real API server uses, because clients branch on `reason` and `code`.
"""

from __future__ import annotations

from typing import Any

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An API failure carrying the HTTP code, the Status reason and optional details."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        return status_object(self.code, self.message, self.reason, self.details)


def status_object(
    code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "code": code,
    }
    if code >= 400:
        status["reason"] = reason or _REASONS.get(code, "Unknown")
    if details:
        status["details"] = details
    return status


def _resource_label(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        f'{_resource_label(group, plural)} "{name}" not found',
        details={"name": name, "group": group, "kind": plural},
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{_resource_label(group, plural)} "{name}" already exists',
        reason="AlreadyExists",
        details={"name": name, "group": group, "kind": plural},
    )


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {_resource_label(group, plural)} "{name}": {why}',
        details={"name": name, "group": group, "kind": plural},
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; each cause is (field, reason type, message) as in field.ErrorList."""
    summary = ", ".join(f"{field}: {message}" for field, _, message in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"  # an aggregate of several errors, as apierrors.NewInvalid prints it
    return ApiError(
        422,
        f'{kind}{"." + group if group else ""} "{name}" is invalid: {summary}',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": reason, "message": message, "field": field} for field, reason, message in causes],
        },
    )
