"""An HTTPS admission webhook server for tests (its CA and certificate made by `kubesim.tls`),
and a validating webhook that holds writes a while: what a slow admission chain does to the
callers of the API server.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
from aiohttp import web

from kubesim.handle import KubeSim
from kubesim.tls import Credentials, make_credentials

SERVICE_HOST = "whsvc.whns.svc"
Answer = Callable[[dict[str, Any]], dict[str, Any]]


def allow(_: dict[str, Any]) -> dict[str, Any]:
    return {"allowed": True}


class WebhookServer:
    """An HTTPS admission webhook on its own thread: each path answers as `answers[path]` says
    (allow by default) after `delays[path]` seconds, and keeps every AdmissionReview it got."""

    def __init__(self) -> None:
        self.credentials: Credentials = make_credentials(("127.0.0.1", "localhost", SERVICE_HOST))
        self.answers: dict[str, Answer] = {}
        self.delays: dict[str, float] = {}
        self.reviews: dict[str, list[dict[str, Any]]] = {}
        self.queries: dict[str, list[dict[str, str]]] = {}
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.setdefault(request.path, []).append(review)
        self.queries.setdefault(request.path, []).append(dict(request.query))
        await asyncio.sleep(self.delays.get(request.path, 0))
        answer = self.answers.get(request.path, allow)(review["request"])
        if "raw" in answer:
            return web.json_response(answer["raw"])
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": {"uid": review["request"]["uid"], **answer}})

    def start(self) -> WebhookServer:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)

        async def serve() -> int:
            assert self._runner is not None
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.credentials.server_context())
            await site.start()
            return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self.port = self._loop.run_until_complete(serve())
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, name="webhook", daemon=True).start()
        assert ready.wait(10)
        return self

    def stop(self) -> None:
        assert self._runner is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.credentials.ca_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def requests(self, path: str) -> list[dict[str, Any]]:
        return [review["request"] for review in self.reviews.get(path, [])]


def hold_writes(sim: KubeSim, server: WebhookServer, name: str, namespace: str, rules: list[dict[str, Any]],
                seconds: float) -> Callable[[], None]:
    """Register webhook `name`: each write `rules` match in `namespace` is allowed after
    `seconds`. Returns what removes it."""
    path = f"/hold-{name}"
    server.delays[path] = seconds
    hook = {
        "name": f"{name}.hold.example.com",
        "clientConfig": {"url": server.url(path), "caBundle": server.ca_bundle},
        "rules": rules,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "timeoutSeconds": 10,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    admission = kubernetes.client.AdmissionregistrationV1Api(sim.api_client())
    admission.create_validating_webhook_configuration({"metadata": {"name": name}, "webhooks": [hook]})
    return lambda: admission.delete_validating_webhook_configuration(name)


def pod_writes(*operations: str) -> list[dict[str, Any]]:
    """The webhook rule for `operations` (CREATE, DELETE, ...) of pods."""
    return [{"operations": list(operations), "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
