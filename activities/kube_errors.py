"""Translate Kubernetes API failures into typed, capped `ApplicationError`s.

The boundary rule (ARCHITECTURE.md "Activities"): a request the API server refuses on its
merits (400/415/422 Invalid, 403 Forbidden or over quota, 404 where the object had to
exist, 409 AlreadyExists of someone else's object) is permanent and non-retryable; a
request that lost a race or met a busy or unreachable server (409 on a stale
resourceVersion, 410, 429, 5xx, connection errors, 401 while a token rotates, 403 from a
quota not yet counted) is retryable, and a Retry-After from the server becomes
`next_retry_delay`. The error's `type` is a `KubeErrorType` value so workflows branch on
types, never on message text.
Messages are capped so a failure can never exceed Temporal's payload limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from models.kube_ops import NON_RETRYABLE_ERRORS, KubeErrorType

EXPECTED_ERRORS = frozenset({KubeErrorType.QUOTA_EXCEEDED})
"""Refusals the workflow waits out as a matter of course (a full ResourceQuota: the Instance
tries again every 30 s): benign to the SDK, which then logs them at debug, without the warning
and traceback it writes for a failed activity (hundreds a minute for a fleet held by its quota),
and does not count them as failures in its metrics."""
MESSAGE_LIMIT = 1000
# A Retry-After beyond this is not trusted: the workflow's own retry policy takes over.
MAX_RETRY_AFTER = timedelta(minutes=5)



def cap(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` cut to `limit` characters, saying it was cut."""
    return text if len(text) <= limit else text[: limit - 15] + "... (truncated)"


def status_of(error: ApiException) -> dict[str, Any]:
    """The `Status` object the server answered with, or {} when the body is not one."""
    body = error.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body:
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def reason_of(error: ApiException) -> str:
    """The Status `reason` (`AlreadyExists`, `Conflict`, `Invalid`, ...) or ''."""
    return str(status_of(error).get("reason") or "")


def is_already_exists(error: ApiException) -> bool:
    return error.status == 409 and reason_of(error) == "AlreadyExists"


QUOTA_REFUSALS = frozenset({KubeErrorType.QUOTA_EXCEEDED, KubeErrorType.QUOTA_NOT_COUNTED})


def is_quota_refusal(error: ApiException) -> bool:
    """403 from the ResourceQuota admission: exceeded, or not counted yet."""
    message = str(status_of(error).get("message") or error.reason or "")
    return error.status == 403 and _api_error_type(error, message) in QUOTA_REFUSALS


def is_conflict(error: ApiException) -> bool:
    """409 that is not AlreadyExists: a stale resourceVersion or a failed precondition."""
    return error.status == 409 and not is_already_exists(error)


def _header(error: ApiException, name: str) -> str | None:
    headers = error.headers or {}
    for key, value in dict(headers).items():
        if str(key).lower() == name.lower():
            return str(value)
    return None


def retry_after(error: ApiException) -> timedelta | None:
    """Retry-After (seconds or HTTP date), else Status details.retryAfterSeconds, capped."""
    delay: timedelta | None = None
    value = _header(error, "Retry-After")
    if value:
        value = value.strip()
        if value.isdigit():
            delay = timedelta(seconds=int(value))
        else:
            try:
                delay = parsedate_to_datetime(value) - datetime.now(UTC)
            except (TypeError, ValueError):
                delay = None
    if delay is None:
        seconds = (status_of(error).get("details") or {}).get("retryAfterSeconds")
        if isinstance(seconds, int) and seconds > 0:
            delay = timedelta(seconds=seconds)
    if delay is None:
        return None
    return max(timedelta(seconds=0), min(delay, MAX_RETRY_AFTER))


def _api_error_type(error: ApiException, message: str) -> KubeErrorType:
    code = error.status or 0
    if code in (400, 405, 406, 415, 422):
        return KubeErrorType.INVALID
    if code == 401:
        return KubeErrorType.UNAUTHORIZED
    if code == 403:
        # ResourceQuota admission answers 403 "exceeded quota": the Instance waits for room
        # (spec §9 `QuotaExceeded` hold) rather than failing like an RBAC refusal.
        if "exceeded quota" in message:
            return KubeErrorType.QUOTA_EXCEEDED
        # ... and "status unknown for quota" while the quota controller has not counted a quota
        # (just created, or a limit on a resource it cannot count yet): retried, not a refusal.
        if "status unknown for quota" in message:
            return KubeErrorType.QUOTA_NOT_COUNTED
        return KubeErrorType.FORBIDDEN
    if code == 404:
        return KubeErrorType.NOT_FOUND
    if code == 409:
        return KubeErrorType.NAME_TAKEN if is_already_exists(error) else KubeErrorType.CONFLICT
    if code in (410,):
        return KubeErrorType.CONFLICT
    if code == 429:
        return KubeErrorType.TOO_MANY_REQUESTS
    if code == 0:
        # The client reports TLS failures and unsendable requests with status 0.
        return KubeErrorType.UNREACHABLE
    return KubeErrorType.SERVER_ERROR


def translate(error: BaseException, action: str) -> ApplicationError:
    """An `ApplicationError` for `error`, raised while doing `action` (e.g. 'create pod x')."""
    if isinstance(error, ApiException):
        status = status_of(error)
        server_message = str(status.get("message") or error.reason or "")
        error_type = _api_error_type(error, server_message)
        code = error.status or 0
        reason = str(status.get("reason") or error.reason or "")
        message = cap(f"{action}: HTTP {code} {reason}: {server_message}")
        delay = retry_after(error) if code in (429, 503, 504) else None
        expected = error_type in EXPECTED_ERRORS
        return ApplicationError(
            message,
            {"code": code, "reason": reason},
            type=error_type.value,
            non_retryable=error_type in NON_RETRYABLE_ERRORS,
            next_retry_delay=delay,
            category=ApplicationErrorCategory.BENIGN if expected else ApplicationErrorCategory.UNSPECIFIED,
        )
    if isinstance(error, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError | OSError):
        return ApplicationError(
            cap(f"{action}: API server unreachable: {type(error).__name__}: {error}"),
            type=KubeErrorType.UNREACHABLE.value,
        )
    return ApplicationError(
        cap(f"{action}: {type(error).__name__}: {error}"), type=KubeErrorType.SERVER_ERROR.value
    )


@contextmanager
def api_errors(action: str) -> Iterator[None]:
    """Re-raise API and connection failures inside the block as translated errors."""
    try:
        yield
    except ApplicationError:
        raise
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
        raise translate(error, action) from error
