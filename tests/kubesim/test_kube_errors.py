"""Translation of API failures into typed `ApplicationError`s (`activities/kube_errors.py`).

Table tests of the boundary rule, without a cluster: which failures are permanent, which are
retried, how Retry-After becomes `next_retry_delay`, and that messages stay capped.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.testing import ActivityEnvironment

from activities.kube import KubeActivities
from activities.kube_errors import MESSAGE_LIMIT, retry_after, translate
from models.kube_ops import CrdExistsInput, KubeErrorType

pytestmark = pytest.mark.kubesim


def test_unreachable_api_server_is_retryable() -> None:
    config = Configuration()
    config.host = "http://127.0.0.1:9"  # discard port: nothing listens
    config.retries = False
    kube = KubeActivities(ApiClient(config))
    with pytest.raises(ApplicationError) as caught:
        ActivityEnvironment().run(kube.crd_exists, CrdExistsInput())
    assert caught.value.type == KubeErrorType.UNREACHABLE and not caught.value.non_retryable


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected", "retryable"),
    [
        (
            403,
            '{"reason":"Forbidden","message":"pods is forbidden: User cannot create"}',
            {},
            "Forbidden",
            False,
        ),
        (
            403,
            '{"reason":"Forbidden","message":"exceeded quota: gpu, requested: nvidia.com/gpu=8"}',
            {},
            "QuotaExceeded",
            False,
        ),
        (
            403,
            '{"reason":"Forbidden","message":"pods \\"x\\" is forbidden: status unknown for quota: q, resources: pods"}',
            {},
            "QuotaNotCounted",
            True,
        ),
        (409, '{"reason":"AlreadyExists","message":"pods \\"x\\" already exists"}', {}, "NameTaken", False),
        (409, '{"reason":"Conflict","message":"the object has been modified"}', {}, "Conflict", True),
        (415, '{"reason":"UnsupportedMediaType","message":"bad"}', {}, "Invalid", False),
        (401, '{"reason":"Unauthorized","message":"token expired"}', {}, "Unauthorized", True),
        (503, "not json", {"Retry-After": "7"}, "ServerError", True),
    ],
)
def test_translation_table(
    status: int, body: str, headers: dict[str, str], expected: str, retryable: bool
) -> None:
    error = ApiException(status=status, reason="x", body=body)
    error.headers = headers
    translated = translate(error, "do something")
    assert translated.type == expected and translated.non_retryable is not retryable
    benign = translated.category == ApplicationErrorCategory.BENIGN
    assert benign is (expected == "QuotaExceeded"), "only a refusal waited out as a matter of course is benign"
    assert translated.message.startswith("do something: HTTP")
    if headers:
        assert translated.next_retry_delay == timedelta(seconds=7)


def test_messages_are_capped() -> None:
    error = ApiException(status=422, reason="Invalid", body='{"message": "' + "y" * 10_000 + '"}')
    assert len(translate(error, "create pod").message) == MESSAGE_LIMIT


def test_retry_after_reads_status_details_and_caps_long_waits() -> None:
    error = ApiException(status=429, reason="TooManyRequests", body='{"details": {"retryAfterSeconds": 3}}')
    assert retry_after(error) == timedelta(seconds=3)
    error = ApiException(status=429, reason="TooManyRequests", body="{}")
    error.headers = {"retry-after": "86400"}
    assert retry_after(error) == timedelta(minutes=5)
    assert retry_after(ApiException(status=429, reason="TooManyRequests")) is None
