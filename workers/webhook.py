"""The validating admission webhook process: `python -m workers.webhook`.

    python -m workers.webhook --port 9443 --host 127.0.0.1 --cert-dir .data/webhook \\
        --failure-policy Fail --url-host 127.0.0.1          # beside kubesim (`make up`)
    python -m workers.webhook --in-cluster                  # deploy/webhook.yaml

An HTTPS aiohttp server answering AdmissionReviews at `POST /validate-ome-io-v1beta1-
inferenceservice` with the InferenceService workflow's own admission
(`workers.webhook_review`), and `GET /healthz`. At start it makes or reuses its CA and serving
certificate (`workers.webhook_certs`: a directory locally, the Secret
`ome-system/ome-webhook-server-cert` in a cluster) and then makes the API server trust it
(`workers.webhook_registration`: locally it writes the ValidatingWebhookConfiguration with its
URL; in a cluster it patches the CA into the one deploy/webhook.yaml created). The Kubernetes
connection is the other processes' (`workers.config.kube_api_client`); the sync client runs in
threads.

Command-line flags win over the `OME_WEBHOOK__*` settings (`workers.config.WebhookSettings`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from aiohttp import web
from kubernetes.client import AdmissionregistrationV1Api, ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from models.runtime import ServingRuntimeSpec
from workers.config import Settings, kube_api_client
from workers.webhook_certs import SECRET_NAMESPACE, Credentials, ensure_in_directory, ensure_in_secret
from workers.webhook_registration import FAILURE_POLICIES, patch_ca_bundle, register_local
from workers.webhook_review import WEBHOOK_PATH, MalformedReview, ReadRuntime, review

logger = logging.getLogger("workers.webhook")

SERVICE_NAME = "ome-webhook-server-service"
"""deploy/webhook.yaml's Service: the names the API server reaches the webhook by in a cluster."""
REVIEW_MAX_BYTES = 8 * 1024 * 1024
"""An UPDATE's review carries the object twice (new and old), each up to the API server's ~1.5 MiB."""
READ_TIMEOUT_SECONDS = 4.0
"""Per runtime GET: two of them fit the configuration's 10 s timeoutSeconds with room to answer."""


@dataclass(frozen=True)
class WebhookOptions:
    """How one webhook process serves and registers itself."""

    port: int = 9443
    """Port it listens on; 0 picks a free one (tests). The Service maps 443 to 9443."""
    host: str = "127.0.0.1"
    """Address it binds: loopback beside kubesim, `0.0.0.0` in a pod."""
    cert_dir: Path = Path(".data/webhook")
    """Local mode: where ca.crt, tls.crt and tls.key are kept between runs."""
    failure_policy: str = "Fail"
    """Local mode: the failurePolicy written into the configuration (a cluster's is deploy/webhook.yaml's)."""
    url_host: str = "127.0.0.1"
    """Local mode: the host in the configuration's `clientConfig.url`, named by the certificate."""
    in_cluster: bool = False
    """Keep the certificate in the Secret and patch the CA into the deployed configuration."""
    namespace: str = SECRET_NAMESPACE
    """In a cluster: the namespace of the Secret and the Service."""

    def hosts(self) -> tuple[str, ...]:
        """The names the certificate must carry: what the API server dials."""
        if self.in_cluster:
            service = f"{SERVICE_NAME}.{self.namespace}"
            return (SERVICE_NAME, service, f"{service}.svc", f"{service}.svc.cluster.local")
        return tuple(dict.fromkeys((self.url_host, "127.0.0.1", "localhost")))

    def url(self, port: int) -> str:
        host = f"[{self.url_host}]" if ":" in self.url_host else self.url_host
        return f"https://{host}:{port}{WEBHOOK_PATH}"


class RuntimeUnavailable(RuntimeError):
    """The ServingRuntime could not be read or parsed: answered with HTTP 500, so the
    configuration's failurePolicy decides, rather than admission without the runtime."""


class RuntimeReader:
    """`spec.runtime.name` -> the namespace's ServingRuntime, else the ClusterServingRuntime, else None."""

    def __init__(self, api_client: ApiClient) -> None:
        self.custom = CustomObjectsApi(api_client)

    def __call__(self, namespace: str, name: str) -> ServingRuntimeSpec | None:
        found = self._read("ServingRuntime", name, namespace)
        if found is None:
            found = self._read("ClusterServingRuntime", name, None)
        if found is None:
            return None
        kind, runtime = found
        try:
            return ServingRuntimeSpec.model_validate(runtime.get("spec") or {})
        except ValidationError as error:
            raise RuntimeUnavailable(f"{kind} {name} does not parse: {str(error)[:500]}") from error

    def _read(self, kind: str, name: str, namespace: str | None) -> tuple[str, dict[str, Any]] | None:
        found: Any
        try:
            if namespace is not None:
                found = self.custom.get_namespaced_custom_object(
                    "ome.io", "v1beta1", namespace, "servingruntimes", name, _request_timeout=READ_TIMEOUT_SECONDS
                )
            else:
                found = self.custom.get_cluster_custom_object(
                    "ome.io", "v1beta1", "clusterservingruntimes", name, _request_timeout=READ_TIMEOUT_SECONDS
                )
        except ApiException as error:
            if error.status == 404:
                return None
            raise RuntimeUnavailable(f"reading {kind} {name} failed: {error.status} {error.reason}") from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise RuntimeUnavailable(f"reading {kind} {name} failed: {error}") from error
        return kind, found


def application(read_runtime: ReadRuntime) -> web.Application:
    """The webhook's routes; `read_runtime` blocks, so each review runs in a thread."""

    async def validate(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError as error:
            return web.Response(status=400, text=f"the body is not JSON: {error}")
        try:
            answer = await asyncio.to_thread(review, body, read_runtime)
        except MalformedReview as error:
            return web.Response(status=400, text=f"malformed AdmissionReview: {error}")
        except RuntimeUnavailable as error:
            logger.warning("answering 500: %s", error)
            return web.Response(status=500, text=str(error))
        response = answer["response"]
        if not response["allowed"]:
            logger.info("denied %s: %s", response["uid"], response["status"]["message"].replace("\n", " | "))
        return web.json_response(answer)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=REVIEW_MAX_BYTES)
    app.router.add_post(WEBHOOK_PATH, validate)
    app.router.add_get("/healthz", healthz)
    return app


@dataclass
class RunningWebhook:
    """A started webhook: where it listens and what it presents."""

    runner: web.AppRunner
    port: int
    credentials: Credentials

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start(options: WebhookOptions, api_client: ApiClient) -> RunningWebhook:
    """Certificates, then the server, then the configuration pointing at it (its port is known
    only once bound, and the API server must not be sent to a port nobody answers on)."""
    hosts = options.hosts()
    if options.in_cluster:
        credentials = await asyncio.to_thread(ensure_in_secret, CoreV1Api(api_client), hosts, options.namespace)
    else:
        credentials = await asyncio.to_thread(ensure_in_directory, options.cert_dir, hosts)
    runner = web.AppRunner(application(RuntimeReader(api_client)), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, options.host, options.port, ssl_context=credentials.server_context())
    await site.start()
    port = runner.addresses[0][1]
    registration = AdmissionregistrationV1Api(api_client)
    try:
        if options.in_cluster:
            await asyncio.to_thread(patch_ca_bundle, registration, credentials.ca_pem)
        else:
            await asyncio.to_thread(
                register_local, registration, credentials.ca_pem, options.url(port), options.failure_policy
            )
    except BaseException:
        await runner.cleanup()
        raise
    logger.info("webhook serving https://%s:%d%s", options.host, port, WEBHOOK_PATH)
    return RunningWebhook(runner, port, credentials)


def _settings_defaults() -> WebhookOptions:
    """`OME_WEBHOOK__*` (`workers.config.WebhookSettings`), which the flags override."""
    settings = Settings()
    webhook = settings.webhook
    return WebhookOptions(
        port=webhook.port,
        host=webhook.host,
        cert_dir=webhook.cert_dir or settings.stack.data_dir / "webhook",
        failure_policy=webhook.failure_policy,
        url_host=webhook.url_host,
        in_cluster=webhook.in_cluster,
    )


def parse_options(argv: Sequence[str] | None = None) -> WebhookOptions:
    defaults = _settings_defaults()
    parser = argparse.ArgumentParser(prog="python -m workers.webhook", description="The validating admission webhook for InferenceServices.")
    parser.add_argument("--port", type=int, default=defaults.port, help="listen port (default %(default)s)")
    parser.add_argument("--host", default=defaults.host, help="bind address (default %(default)s)")
    parser.add_argument("--cert-dir", type=Path, default=defaults.cert_dir,
                        help="local mode: where the CA and certificate are kept (default %(default)s)")
    parser.add_argument("--failure-policy", choices=FAILURE_POLICIES, default=defaults.failure_policy,
                        help="local mode: the configuration's failurePolicy (default %(default)s)")
    parser.add_argument("--url-host", default=defaults.url_host,
                        help="local mode: host of the configuration's clientConfig.url (default %(default)s)")
    parser.add_argument("--in-cluster", action="store_true", default=defaults.in_cluster,
                        help="keep the certificate in the Secret and patch the deployed configuration's caBundle")
    parser.add_argument("--namespace", default=defaults.namespace,
                        help="in-cluster: namespace of the Secret and Service (default %(default)s)")
    args = parser.parse_args(argv)
    return WebhookOptions(port=args.port, host=args.host, cert_dir=args.cert_dir, failure_policy=args.failure_policy,
                          url_host=args.url_host, in_cluster=args.in_cluster, namespace=args.namespace)


async def main(argv: Sequence[str] | None = None) -> None:
    """Process entry point: serve until SIGTERM or SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    options = parse_options(argv)
    api_client = kube_api_client(Settings())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    running = await start(options, api_client)
    try:
        await stop.wait()
    finally:
        await running.stop()
        api_client.close()  # type: ignore[no-untyped-call]
        logger.info("webhook stopped")


if __name__ == "__main__":
    asyncio.run(main())
