"""The ValidatingWebhookConfiguration that sends InferenceService writes to the webhook.

Two ways, one entry (`webhook_entry`):
- local (`make up`, tests): the webhook runs beside kubesim on 127.0.0.1, so it writes the
  whole configuration itself, `clientConfig.url` pointing at its port, replacing any earlier
  one (the port and the CA change between runs);
- in a cluster: deploy/webhook.yaml creates the configuration with `clientConfig.service` and
  an empty `caBundle`, and the webhook patches only the caBundle of its own entry, so its RBAC
  is get and patch of that one object.

Public API: `register_local`, `patch_ca_bundle`, `webhook_configuration`, `webhook_entry`,
`CONFIGURATION_NAME`, `WEBHOOK_NAME`, `FAILURE_POLICIES`.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from kubernetes.client import AdmissionregistrationV1Api
from kubernetes.client.exceptions import ApiException

logger = logging.getLogger(__name__)

CONFIGURATION_NAME = "ome-validating-webhook-configuration"
WEBHOOK_NAME = "inferenceservice.ome-webhook-server.validator"
"""The name kubectl prints: `admission webhook "<name>" denied the request: ...`."""
FAILURE_POLICIES = ("Fail", "Ignore")
TIMEOUT_SECONDS = 10
"""Admission is pure and fast; the time goes to reading the ServingRuntime, one GET or two."""


def webhook_entry(client_config: dict[str, Any], failure_policy: str = "Fail") -> dict[str, Any]:
    """The one webhook: CREATE and UPDATE of ome.io/v1beta1 InferenceServices."""
    if failure_policy not in FAILURE_POLICIES:
        raise ValueError(f"failurePolicy must be Fail or Ignore, got {failure_policy!r}")
    return {
        "name": WEBHOOK_NAME,
        "clientConfig": client_config,
        "rules": [
            {
                "apiGroups": ["ome.io"],
                "apiVersions": ["v1beta1"],
                "resources": ["inferenceservices"],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": TIMEOUT_SECONDS,
    }


def webhook_configuration(ca_pem: bytes, url: str, failure_policy: str = "Fail") -> dict[str, Any]:
    """The configuration a local webhook writes: its URL and its CA."""
    client_config = {"url": url, "caBundle": base64.b64encode(ca_pem).decode()}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION_NAME, "labels": {"app.kubernetes.io/part-of": "omeflow"}},
        "webhooks": [webhook_entry(client_config, failure_policy)],
    }


def register_local(api: AdmissionregistrationV1Api, ca_pem: bytes, url: str, failure_policy: str = "Fail") -> None:
    """Create the configuration pointing at `url`, or replace the one an earlier run wrote."""
    # The client sends a dict as it is; its type hints name only its own models.
    body: Any = webhook_configuration(ca_pem, url, failure_policy)
    try:
        current = api.read_validating_webhook_configuration(CONFIGURATION_NAME)
    except ApiException as error:
        if error.status != 404:
            raise
        api.create_validating_webhook_configuration(body)
        logger.info("created ValidatingWebhookConfiguration %s -> %s", CONFIGURATION_NAME, url)
        return
    assert current.metadata is not None
    body["metadata"]["resourceVersion"] = current.metadata.resource_version
    api.replace_validating_webhook_configuration(CONFIGURATION_NAME, body)
    logger.info("replaced ValidatingWebhookConfiguration %s -> %s", CONFIGURATION_NAME, url)


def patch_ca_bundle(api: AdmissionregistrationV1Api, ca_pem: bytes) -> None:
    """Put the CA into the caBundle of the deployed configuration's webhook entry."""
    try:
        current = api.read_validating_webhook_configuration(CONFIGURATION_NAME)
    except ApiException as error:
        if error.status == 404:
            raise RuntimeError(
                f"ValidatingWebhookConfiguration {CONFIGURATION_NAME} does not exist: apply deploy/webhook.yaml, "
                "which creates it with an empty caBundle for this webhook to fill"
            ) from error
        raise
    webhooks = current.webhooks or []
    names = [webhook.name for webhook in webhooks]
    if WEBHOOK_NAME not in names:
        raise RuntimeError(
            f"ValidatingWebhookConfiguration {CONFIGURATION_NAME} has no webhook {WEBHOOK_NAME} (it has "
            f"{names}): re-apply deploy/webhook.yaml"
        )
    index = names.index(WEBHOOK_NAME)
    bundle = base64.b64encode(ca_pem).decode()
    if webhooks[index].client_config.ca_bundle == bundle:
        logger.info("ValidatingWebhookConfiguration %s already carries the CA", CONFIGURATION_NAME)
        return
    # The test guards the index: an edit between the read and the patch fails the patch, not another entry.
    patch: Any = [
        {"op": "test", "path": f"/webhooks/{index}/name", "value": WEBHOOK_NAME},
        {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle},
    ]
    api.patch_validating_webhook_configuration(CONFIGURATION_NAME, patch)
    logger.info("patched the CA into ValidatingWebhookConfiguration %s", CONFIGURATION_NAME)
