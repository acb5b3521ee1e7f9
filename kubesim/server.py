"""The HTTP front: routes Kubernetes REST paths to the API semantics, serves discovery and
streams watches.

Wire details the official client depends on: creates answer 201, bodies are JSON unless the
Content-Type says protobuf or YAML (Python clients send none; kubectl sends protobuf for built-in
kinds), OpenAPI v3 is served for kubectl apply, every error is a `Status`, and a watch
is a chunked stream of JSON lines that ends at `timeoutSeconds` or with an `ERROR` event.

Writes (create, update, every patch kind and apply, delete) pass the validating admission webhooks
of the stored ValidatingWebhookConfigurations first (`kubesim.admitted_writes`): the would-be
object is computed as a dry run, admitted, then committed.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import time
from typing import Any

import yaml
from aiohttp import web

from kubesim import fastjson, protobuf, subresources
from kubesim.admitted_writes import WARNINGS, AdmittedWrites, add_warnings, warning_header
from kubesim.api import Api
from kubesim.control import Control
from kubesim.engines import exposition
from kubesim.engines.traffic import Traffic
from kubesim.errors import ApiError, status_object
from kubesim.fastjson import dumps
from kubesim.faults import Faults
from kubesim.openapi import OpenApi, schema_version
from kubesim.resources import ResourceType
from kubesim.selectors import labels_match, parse_field_selector, parse_label_selector
from kubesim.store import Change
from kubesim.tables import to_table, wants_table

log = logging.getLogger("kubesim.server")
# The version reported is the one whose OpenAPI schema is served, so clients see one release.
_SCHEMA_VERSION = schema_version()
VERSION_INFO = {
    "major": _SCHEMA_VERSION.split(".")[0], "minor": _SCHEMA_VERSION.split(".")[1],
    "gitVersion": f"v{_SCHEMA_VERSION}-kubesim", "gitCommit": "kubesim",
    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
    "compiler": "gc", "platform": "linux/amd64",
}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
# A real API server sends a bookmark about once a minute; sooner keeps resumes short.
BOOKMARK_SECONDS = 5.0


def parse_bool(value: str | None, name: str) -> bool:
    """strconv.ParseBool, which the API server uses for boolean query parameters."""
    if value is None:
        return False
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ApiError(400, f"query parameter {name}={value!r} is not a boolean (use true or false)")


def accepts_json(accept: str) -> bool:
    """Whether an Accept header admits a JSON answer (no header admits anything)."""
    if not accept.strip():
        return True
    types = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    return any(t in ("application/json", "application/*", "*/*", "*") for t in types)


def _patch_body(raw: bytes, content_type: str) -> Any:
    """A merge or apply patch body as an object, for field validation (None if it is not one)."""
    try:
        if "apply-patch" in content_type:
            return yaml.safe_load(raw.decode()) if raw else None
        return fastjson.loads(raw) if raw else None
    except (ValueError, yaml.YAMLError, UnicodeDecodeError):
        return None  # the patch itself reports the malformed body


def respond(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=dumps(obj), status=status, content_type="application/json")


def error_response(exc: ApiError) -> web.Response:
    resp = respond(exc.status(), exc.code)
    for key, value in exc.headers.items():
        resp.headers[key] = value
    return resp


class Server:
    """aiohttp application serving one cluster: Kubernetes paths go to the API semantics,
    `/sim/` (also `/kubesim/`) to the control API, `/metrics` to the simulated engines' series, and every API
    request passes the injected faults first."""

    def __init__(self, api: Api, control: Control, faults: Faults, traffic: Traffic, token: str | None = None) -> None:
        self.api = api
        self.token = token
        self.control = control
        self.faults = faults
        self.traffic = traffic
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self.dispatch)
        self._stopping = asyncio.Event()
        self._watch_queues: set[asyncio.Queue[Change | None]] = set()
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self.bookmark_seconds = BOOKMARK_SECONDS
        self.openapi = OpenApi(api.registry, api.store)
        self.admission = AdmittedWrites(api)

    def stop_watches(self) -> None:
        """Tell every open watch stream to end (the server is shutting down)."""
        self._stopping.set()
        for queue in self._watch_queues:
            queue.put_nowait(None)

    async def close_watches(self, grace: float = 0.2) -> None:
        """End every open watch and wait until their handlers are done. A handler blocked writing
        to a client that stopped reading cannot see the end marker, so after `grace` seconds it is
        cancelled; otherwise the HTTP shutdown would wait for it and leave it pending."""
        self.stop_watches()
        tasks = set(self._watch_tasks)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=grace)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if self.token is not None and not self.authenticated(request):
            return respond(status_object(401, "Unauthorized"), 401)
        try:
            if path.startswith(("/sim/", "/kubesim/")) or path in ("/sim", "/kubesim"):
                return await self.control.handle(request, path)
            if path in ("/healthz", "/readyz", "/livez"):
                return web.Response(text="ok")
            if path == "/metrics" and request.method == "GET":
                # Scrapes are not API requests: no counters, no injected faults.
                return web.Response(body=exposition.render(self.traffic.series()).encode(),
                                    headers={"Content-Type": exposition.CONTENT_TYPE})
            if path == "/version":
                # A cluster whose API is made to fail fails its reachability probe too.
                await self.faults.before("get", "version")
                return respond(VERSION_INFO)
            if path.startswith("/openapi/"):
                return self._openapi(request, path)
            parts = path.strip("/").split("/")
            if parts[0] == "api":
                if len(parts) == 1:
                    host = request.host or "127.0.0.1"
                    return respond(self.api.registry.api_versions(host))
                return await self._api_path(request, "", parts[1], parts[2:])
            if parts[0] == "apis":
                if len(parts) == 1:
                    return respond(self.api.registry.api_group_list())
                if len(parts) == 2:
                    group_doc = self.api.registry.api_group(parts[1])
                    if group_doc is None:
                        raise ApiError(404, f"the server could not find the requested resource (group {parts[1]})")
                    return respond(group_doc)
                return await self._api_path(request, parts[1], parts[2], parts[3:])
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        except ApiError as exc:
            return error_response(exc)
        except Exception as exc:  # a bug must still answer as a Status, and be logged
            log.exception("internal error serving %s %s", request.method, request.path)
            return respond(status_object(500, f"kubesim internal error: {exc!r}"), 500)

    def authenticated(self, request: web.Request) -> bool:
        """Whether the request carries the bearer token (the scheme's case does not matter, as
        for the API server's token authenticator). Every path needs it, as on an API server
        with anonymous requests disabled: /version, discovery, /metrics and the control API."""
        scheme, _, credential = (request.headers.get("Authorization") or "").strip().partition(" ")
        assert self.token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode(), self.token.encode())

    def _openapi(self, request: web.Request, path: str) -> web.Response:
        if not accepts_json(request.headers.get("Accept", "")):
            raise ApiError(406, f"only application/json is served at {path}, not "
                           f"{request.headers.get('Accept')!r}: ask for application/json")
        if path == "/openapi/v2":
            body = self.openapi.v2()
        elif path == "/openapi/v3":
            body = dumps(self.openapi.index())
        else:
            doc = self.openapi.document(path[len("/openapi/v3/"):]) if path.startswith("/openapi/v3/") else None
            if doc is None:
                raise ApiError(404, f"the server could not find the requested resource ({path})")
            body = doc
        resp = web.Response(body=body, content_type="application/json")
        if "hash" in request.query:
            # A hashed URL names one immutable version of the document, so clients may cache it.
            resp.headers["Cache-Control"] = "public, immutable"
        return resp

    async def _api_path(self, request: web.Request, group: str, version: str, rest: list[str]) -> web.StreamResponse:
        if not rest:
            doc = self.api.registry.resource_list(group, version)
            if doc is None:
                raise ApiError(404, f"the server could not find the requested resource ({group}/{version})")
            return respond(doc)
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3:
            raise ApiError(404, f"the server could not find the requested resource ({request.path})")
        rt = self.api.resource(group, version, plural)
        if sub == "finalize" and rt.key == ("", "namespaces"):
            sub = "status"
        if sub and sub not in rt.subresources():
            raise ApiError(404, f"the server could not find the requested resource ({plural}/{sub})")
        if namespace and not rt.namespaced:
            raise ApiError(404, f"the server could not find the requested resource ({plural} is cluster-scoped)")
        if rt.namespaced and not namespace and name:
            raise ApiError(404, f"the server could not find the requested resource ({plural} needs a namespace)")
        query = request.query
        method = request.method
        is_watch = method == "GET" and not name and parse_bool(query.get("watch"), "watch")
        verb = self._verb(method, name, is_watch)
        resource = f"{plural}/{sub}" if sub else plural
        self.faults.named(verb, resource, namespace, name)
        await self.faults.before(verb, resource)
        if is_watch:
            return await self._watch(request, rt, namespace)
        try:
            resp = await self._handle(request, rt, namespace, name, sub, verb)
        except ApiError as exc:
            resp = error_response(exc)  # webhook warnings go out with a refusal too
        for problem in request.get(WARNINGS) or []:
            resp.headers.add("Warning", warning_header(problem))
        return resp

    @staticmethod
    def _verb(method: str, name: str, is_watch: bool) -> str:
        if method == "GET":
            return "watch" if is_watch else ("get" if name else "list")
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        if method == "DELETE":
            return "delete" if name else "deletecollection"
        raise ApiError(405, f"method {method} is not allowed")

    async def _body(self, request: web.Request, rt: ResourceType | None = None) -> Any:
        """The request body by its Content-Type: protobuf (built-in kinds), YAML, or JSON (also
        taken when the type is missing or unknown, as many clients send none)."""
        raw = await request.read()
        if not raw:
            return {}
        media = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if media == protobuf.MEDIA_TYPE:
            if rt is not None and not rt.builtin:
                # Custom resources have no protobuf form; the API server answers 415 the same way.
                raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                               f"include: application/json, application/yaml (custom resource {rt.plural}."
                               f"{rt.group} has no protobuf encoding: send JSON)")
            return protobuf.decode(raw)
        if media in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                return yaml.safe_load(raw.decode())
            except (yaml.YAMLError, UnicodeDecodeError) as exc:
                raise ApiError(400, f"the request body is not valid YAML: {exc}") from exc
        try:
            return fastjson.loads(raw)
        except ValueError as exc:
            if media not in ("", "application/json", "*/*"):
                raise ApiError(415, f"the body of the request was in an unknown format ({media}) - accepted media "
                               f"types include: application/json, application/yaml, "
                               f"{protobuf.MEDIA_TYPE}") from exc
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from exc

    def _manager(self, request: web.Request) -> str:
        manager = request.query.get("fieldManager")
        if manager:
            return manager
        # The API server names an unnamed manager after the client's User-Agent prefix.
        return (request.headers.get("User-Agent") or "unknown").split("/")[0]

    async def _handle(self, request: web.Request, rt: ResourceType, namespace: str, name: str, sub: str,
                      verb: str) -> web.StreamResponse:
        api = self.api
        query = request.query
        table = wants_table(request.headers.get("Accept", "")) and not sub
        include = query.get("includeObject", "Metadata")
        if verb == "get":
            if sub == "scale":
                return respond(subresources.get_scale(api, rt, namespace, name))
            obj = api.get(rt, namespace, name)
            if table:
                return respond(to_table(rt, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, include))
            return respond(obj)
        if verb == "list":
            try:
                limit = int(query.get("limit") or 0)
            except ValueError as exc:
                raise ApiError(400, f"limit={query['limit']!r} is not an integer") from exc
            listed = api.list(rt, namespace or None, query.get("labelSelector", ""),
                              query.get("fieldSelector", ""), limit, query.get("continue", ""))
            if table:
                return respond(to_table(rt, listed["items"], listed["metadata"], include))
            return respond(listed)
        if verb == "create":
            body = await self._body(request, rt)
            if not name:
                self._check_fields(request, rt, body)
                meta = body.get("metadata") if isinstance(body, dict) else None
                self.faults.named(verb, rt.plural, namespace, str((meta or {}).get("name") or ""))
            if name and sub in ("eviction", "binding"):
                api.get(rt, namespace, name)
                await self.admission.create_subresource(request, rt, namespace, name, sub, body)
                action = subresources.evict if sub == "eviction" else subresources.bind
                return respond(action(api, namespace, name, body), 201)
            if name:
                raise ApiError(405, f"POST is not supported on {rt.plural}/{name}")
            manager = self._manager(request)

            def create(dry: bool) -> Any:
                obj = api.create(rt, namespace, body, manager, dry)
                meta = body.get("metadata") if isinstance(body, dict) else None
                if dry and isinstance(meta, dict) and not meta.get("name"):
                    meta["name"] = obj["metadata"]["name"]  # a generated name stays the one admitted
                return obj

            return respond(await self.admission.write(request, rt, namespace, "", "", "CREATE", create), 201)
        if verb == "update":
            body = await self._body(request, rt)
            if sub == "scale":
                manager = self._manager(request)
                return respond(await self.admission.write(
                    request, rt, namespace, name, sub, "UPDATE",
                    lambda dry: subresources.write_scale(api, rt, namespace, name, body, manager, "", dry)))
            if not sub:
                self._check_fields(request, rt, body)
            manager = self._manager(request)
            return respond(await self.admission.write(
                request, rt, namespace, name, sub, "UPDATE",
                lambda dry: api.replace(rt, namespace, name, body, manager, sub, dry)))
        if verb == "patch":
            raw = await request.read()
            content_type = request.headers.get("Content-Type", "")
            force = parse_bool(query.get("force"), "force")
            if sub == "scale":
                manager = self._manager(request)
                return respond(await self.admission.write(
                    request, rt, namespace, name, sub, "UPDATE",
                    lambda dry: subresources.write_scale(api, rt, namespace, name, raw, manager, content_type, dry),
                    patch=True))
            manager = query.get("fieldManager", "") if "apply-patch" in content_type else self._manager(request)
            if "apply-patch" not in content_type and force:
                raise ApiError(400, "force may only be set for apply patches (application/apply-patch+yaml)")
            if not sub and "json-patch" not in content_type:
                self._check_fields(request, rt, _patch_body(raw, content_type))
            existed = api.find(rt.group, rt.plural, namespace if rt.namespaced else "", name) is not None
            obj = await self.admission.write(
                request, rt, namespace, name, sub, None,
                lambda dry: api.patch(rt, namespace, name, content_type, raw, manager, force, sub, dry),
                {"force": True} if force else {}, patch=True)
            return respond(obj, 200 if existed else 201)
        if verb == "delete":
            options = await self._delete_options(request)
            obj, gone = await self.admission.write(request, rt, namespace, name, sub, "DELETE",
                                                   lambda dry: api.delete(rt, namespace, name, options, dry), options)
            return respond(obj, 200 if gone or obj.get("kind") == "Status" else 202)
        if verb == "deletecollection":
            options = await self._delete_options(request)
            selectors = (query.get("labelSelector", ""), query.get("fieldSelector", ""))
            if not self.admission.webhooks.configured(rt):
                return respond(api.delete_collection(rt, namespace or None, *selectors, options))
            listed = api.list(rt, namespace or None, *selectors)
            for item in listed["items"]:
                # The API server admits the deletion of each item on its own.
                item_ns, item_name = item["metadata"].get("namespace", ""), item["metadata"]["name"]
                try:
                    await self.admission.write(request, rt, item_ns, item_name, "", "DELETE",
                                               functools.partial(api.delete, rt, item_ns, item_name, options),
                                               options)
                except ApiError as exc:
                    if exc.code != 404:
                        raise
            return respond(listed)
        raise ApiError(405, f"{verb} is not supported")

    def _check_fields(self, request: web.Request, rt: ResourceType, body: Any) -> None:
        """fieldValidation as the API server applies it: Strict rejects fields the schema does not
        declare (kubectl sends Strict and, seeing the parameter in OpenAPI, leaves validation to
        the server), Warn answers with Warning headers, Ignore (and no parameter) checks nothing."""
        directive = request.query.get("fieldValidation", "")
        if directive in ("", "Ignore"):
            return
        if directive not in ("Strict", "Warn"):
            raise ApiError(400, f"fieldValidation={directive!r} is not valid: use Ignore, Warn or Strict")
        unknown = self.openapi.unknown_fields(rt, body)
        if not unknown:
            return
        problems = [f'unknown field "{path}"' for path in unknown]
        if directive == "Strict":
            raise ApiError(400, f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                           "strict decoding error: " + ", ".join(problems))
        add_warnings(request, problems)

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await self._body(request)
        options: dict[str, Any] = body if isinstance(body, dict) else {}
        query = request.query
        if "gracePeriodSeconds" in query:
            try:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError as exc:
                raise ApiError(400, f"gracePeriodSeconds={query['gracePeriodSeconds']!r} is not an integer") from exc
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in query:
            options["orphanDependents"] = parse_bool(query["orphanDependents"], "orphanDependents")
        policy = options.get("propagationPolicy")
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise ApiError(422, f"propagationPolicy {policy!r} is not supported: use Orphan, Background or Foreground")
        return options

    # ---- watch -----------------------------------------------------------------------------

    async def _watch(self, request: web.Request, rt: ResourceType, namespace: str) -> web.StreamResponse:
        query = request.query
        label_reqs = parse_label_selector(query.get("labelSelector", ""))
        field_match = parse_field_selector(query.get("fieldSelector", ""), rt.plural, rt.builtin)
        bookmarks = parse_bool(query.get("allowWatchBookmarks"), "allowWatchBookmarks")
        send_initial = parse_bool(query.get("sendInitialEvents"), "sendInitialEvents")
        timeout = float(query.get("timeoutSeconds") or 1800)
        rv = query.get("resourceVersion", "")
        store = self.api.store
        # kubectl get -w asks for Tables: each event then carries a one-row Table, and only the
        # first one the column definitions, as the API server sends them.
        as_table = wants_table(request.headers.get("Accept", ""))
        include = query.get("includeObject", "Metadata")
        headers_sent = False

        def encode(obj: dict[str, Any]) -> dict[str, Any]:
            nonlocal headers_sent
            if not as_table:
                return obj
            table = to_table(rt, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, include)
            if headers_sent:
                table["columnDefinitions"] = []
            headers_sent = True
            return table

        def matches(obj: dict[str, Any] | None) -> bool:
            if obj is None:
                return False
            meta = obj["metadata"]
            if namespace and meta.get("namespace") != namespace:
                return False
            return labels_match(label_reqs, meta.get("labels")) and field_match(obj)

        queue: asyncio.Queue[Change | None] = asyncio.Queue()

        def on_change(change: Change) -> None:
            if change.type_key == rt.key:
                queue.put_nowait(change)

        unsubscribe = store.subscribe(on_change)
        backlog: list[Change] = []
        initial: list[dict[str, Any]] = []
        error: ApiError | None = None
        if rv in ("", "0") or send_initial:
            initial = [o for o in store.list(rt.key, namespace or None) if matches(o)]
        else:
            try:
                backlog = [c for c in store.changes_since(int(rv)) if c.type_key == rt.key]
            except ValueError:
                unsubscribe()
                raise ApiError(400, f"resourceVersion {rv!r} is not a valid resource version") from None
            except ApiError as exc:
                error = exc
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        faults = self.faults
        faults.watches_open += 1
        self._watch_queues.add(queue)
        task = asyncio.current_task()
        if task is not None:
            self._watch_tasks.add(task)
        try:
            await response.prepare(request)
            if error is not None:
                await response.write(dumps({"type": "ERROR", "object": error.status()}) + b"\n")
                return response
            for obj in initial:
                await response.write(dumps({"type": "ADDED", "object": encode(obj)}) + b"\n")
            if send_initial and bookmarks:
                await response.write(self._bookmark(rt, str(store.rv), initial_end=True))
            for past in backlog:
                await self._send(response, past, matches, encode)
            start = time.monotonic()
            deadline = start + timeout
            cut = faults.settings.watch_cut_seconds
            if cut:
                deadline = min(deadline, start + cut)
            last_rv = str(store.rv)
            while not self._stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    change: Change | None = await asyncio.wait_for(queue.get(), min(remaining, self.bookmark_seconds))
                except TimeoutError:
                    if bookmarks:
                        await response.write(self._bookmark(rt, last_rv))
                    continue
                if change is None:
                    break
                last_rv = str(change.rv)
                await self._send(response, change, matches, encode)
        except ConnectionResetError:
            pass  # the client went away: nothing left to send
        finally:
            unsubscribe()
            if task is not None:
                self._watch_tasks.discard(task)
            self._watch_queues.discard(queue)
            faults.watches_open -= 1
        return response

    @staticmethod
    def _bookmark(rt: ResourceType, rv: str, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": rv}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return dumps({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version,
                                                    "metadata": meta}}) + b"\n"

    @staticmethod
    async def _send(response: web.StreamResponse, change: Change, matches: Any, encode: Any) -> None:
        now_in, was_in = matches(change.obj), matches(change.old)
        if change.type == "DELETED":
            kind = "DELETED" if was_in else None
        elif change.type == "ADDED":
            kind = "ADDED" if now_in else None
        elif now_in:
            kind = "MODIFIED" if was_in else "ADDED"
        else:
            kind = "DELETED" if was_in else None
        if kind:
            await response.write(dumps({"type": kind, "object": encode(change.obj)}) + b"\n")
