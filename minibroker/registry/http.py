"""The Schema Registry's listener: Confluent's REST API (v1) served by aiohttp on the broker's
loop, imported only with ``--schema-registry-listener``.

Answers are ``application/vnd.schemaregistry.v1+json``; errors are Confluent's
``{"error_code": N, "message": "..."}`` with its HTTP status (rest/exceptions/Errors.java).
Bodies are read as JSON whichever of the content types the clients send
(``application/vnd.schemaregistry.v1+json``, ``application/vnd.schemaregistry+json``,
``application/json``). While ``_schemas`` is replayed the listener already answers: a request
waits for the replay up to ``wait_s`` (Confluent's reader waits kafkastore.timeout.ms for its
reader to catch up) and then gets 50002.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from minibroker_storage.lazylog import get_logger

from .state import Registry, RegistryError, parse_version, register_json, schema_json, stored_json

log = get_logger("minibroker.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# every resource's @Produces with its server weight (qs), best first (client/rest/Versions.java)
PRODUCES = ((CONTENT_TYPE, 1.0), ("application/vnd.schemaregistry+json", 0.9), ("application/json", 0.5))
# every resource's @Consumes; no Content-Type is octet-stream to JAX-RS, which Confluent reads as JSON
CONSUMES = frozenset({CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json",
                      "application/octet-stream"})
REPLAY_STEP = 2000  # records applied between two turns of the loop while replaying


def _reply(obj: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(obj, separators=(",", ":")), status=status,
                        content_type=CONTENT_TYPE)


def _error(status: int, code: int, message: str) -> web.Response:
    return _reply({"error_code": code, "message": message}, status)


def _media(text: str) -> str:
    return text.split(";", 1)[0].strip().lower()


def _negotiate(accept: str | None) -> str | None:
    """The answer's type as Jersey picks it from @Produces: the client's q first, then the server's
    qs; None when nothing is acceptable (406). An Accept Jersey cannot parse counts as ``*/*``."""
    ranges: list[tuple[str, float]] = []
    for part in (accept or "*/*").split(","):
        media, *params = [p.strip() for p in part.split(";")]
        if not media:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    return CONTENT_TYPE
        ranges.append((media.lower(), q))
    if not ranges:
        return CONTENT_TYPE
    best: tuple[float, float, str] | None = None
    for produced, qs in PRODUCES:
        major = produced.split("/")[0]
        # the most specific range that matches decides the client's q for this type
        match = max(((2 if m == produced else 1 if m == major + "/*" else 0, mq)
                     for m, mq in ranges if m in (produced, major + "/*", "*/*")), default=None)
        if match is not None and match[1] > 0 and (best is None or (match[1], qs) > best[:2]):
            best = (match[1], qs, produced)
    return best[2] if best else None


def _flag(request: web.Request, name: str) -> bool:
    # JAX-RS converts a boolean query parameter with Boolean.valueOf: "true" in any case
    return request.query.get(name, "false").lower() == "true"


def _int(request: web.Request, name: str, default: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        # JAX-RS answers a query parameter that does not convert with 404 (ParamException)
        raise RegistryError(404, 404, "HTTP 404 Not Found") from None


def _page(request: web.Request, items: list[Any], default_limit: int | None = None) -> list[Any]:
    """``offset`` and ``limit`` as Confluent pages every list: the limit counts when it is in
    (0, max], else the default (normalizeLimit); schemas default and cap at 1000
    (schema.search.default.limit / max.limit), everything else is unbounded."""
    offset = max(0, _int(request, "offset", 0))
    limit = _int(request, "limit", -1)
    if limit <= 0 or (default_limit is not None and limit > default_limit):
        limit = default_limit if default_limit is not None else len(items)
    return items[offset:offset + limit]


async def _body(request: web.Request) -> Any:
    try:
        text = (await request.read()).decode("utf-8")
        return json.loads(text) if text.strip() else None
    except ValueError as e:  # not UTF-8 (UnicodeDecodeError is one) or not JSON
        # Jersey's answer to a body Jackson cannot read: 400 with error_code 400
        raise RegistryError(400, 400, f"Unrecognized request body: {e}") from None


class RegistryServer:
    def __init__(self, registry: Registry, *, users: Callable[[str], str | None] | None = None,
                 wait_s: float = 0.5, cluster_id: str | None = None) -> None:
        self.registry = registry
        self.cluster_id = cluster_id  # the Kafka cluster's, for /v1/metadata/id
        self.users = users  # --schema-registry-auth basic: a user's password, None if unknown
        self.wait_s = wait_s
        self.loaded = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.port = 0
        self._replay: asyncio.Task | None = None
        # answers since the start by (method, route pattern, HTTP status), for the control
        # listener's /metrics (control/metrics.py reads it at scrape time)
        self.requests: dict[tuple[str, str, int], int] = {}

    # -- replay -----------------------------------------------------------------------------
    async def replay(self) -> None:
        """Replay ``_schemas`` a step per loop turn, so the listener (and the broker) answer
        meanwhile."""
        try:
            while not self.registry.replay(limit=REPLAY_STEP):
                await asyncio.sleep(0)
        except Exception:
            # a partial state must not be served: requests keep getting 50002, the log says why
            log.exception("registry.replay_failed", offset=self.registry.applied)
            return
        self.loaded.set()

    def start_replay(self) -> None:
        self._replay = asyncio.get_running_loop().create_task(self.replay())

    # -- the application ------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=16 * 1024 * 1024)
        r = app.router
        r.add_get("/", self.root)
        r.add_get("/v1/metadata/id", self.metadata_id)
        r.add_get("/schemas", self.schemas)
        r.add_get("/schemas/types", self.types)
        r.add_get("/schemas/ids/{id}", self.schema_by_id)
        r.add_get("/schemas/ids/{id}/schema", self.raw_schema_by_id)
        r.add_get("/schemas/ids/{id}/versions", self.id_versions)
        r.add_get("/schemas/ids/{id}/subjects", self.id_subjects)
        r.add_get("/schemas/guids/{guid}", self.schema_by_guid)
        r.add_get("/schemas/guids/{guid}/ids", self.guid_ids)
        r.add_get("/contexts", self.contexts)
        r.add_get("/subjects", self.subjects)
        r.add_post("/subjects/{subject}", self.lookup)
        r.add_delete("/subjects/{subject}", self.delete_subject)
        r.add_get("/subjects/{subject}/versions", self.versions)
        r.add_post("/subjects/{subject}/versions", self.register)
        r.add_get("/subjects/{subject}/versions/{version}", self.version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self.version_schema)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by)
        r.add_delete("/subjects/{subject}/versions/{version}", self.delete_version)
        r.add_post("/compatibility/subjects/{subject}/versions", self.compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility)
        r.add_get("/config", self.get_config)
        r.add_put("/config", self.put_config)
        r.add_delete("/config", self.delete_config)
        r.add_get("/config/{subject}", self.get_config)
        r.add_put("/config/{subject}", self.put_config)
        r.add_delete("/config/{subject}", self.delete_config)
        r.add_get("/mode", self.get_mode)
        r.add_put("/mode", self.put_mode)
        r.add_get("/mode/{subject}", self.get_mode)
        r.add_put("/mode/{subject}", self.put_mode)
        r.add_delete("/mode/{subject}", self.delete_mode)
        return app

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        resp = await self._answer(request, handler)
        # the route's pattern, not the path: one series per route whatever the subject or id
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        key = (request.method, route, resp.status)
        self.requests[key] = self.requests.get(key, 0) + 1
        return resp

    async def _answer(self, request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if self.users is not None and not self._authorized(request.headers.get("Authorization")):
            # Confluent's basic auth (Jetty): 401 with the challenge; clients then send credentials
            denied = _error(401, 401, "Unauthorized")
            denied.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
            return denied
        answer_type = CONTENT_TYPE
        try:
            if request.match_info.http_exception is None:
                # JAX-RS matches the path, then @Consumes (415), then @Produces (406)
                sent = request.headers.get("Content-Type")
                if request.method in ("POST", "PUT") and sent is not None and _media(sent) not in CONSUMES:
                    return _error(415, 415, "HTTP 415 Unsupported Media Type")
                negotiated = _negotiate(request.headers.get("Accept"))
                if negotiated is None:
                    return _error(406, 406, "HTTP 406 Not Acceptable")
                answer_type = negotiated
            resp: web.StreamResponse = await self._handle(request, handler)
        except web.HTTPException as e:
            if e.status == 404:
                return _error(404, 404, "HTTP 404 Not Found")
            if e.status == 405:
                return _error(405, 405, "HTTP 405 Method Not Allowed")
            raise
        if answer_type != CONTENT_TYPE and isinstance(resp, web.Response):
            resp.content_type = answer_type
        return resp

    async def _handle(self, request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        try:
            if not self.loaded.is_set():
                try:
                    await asyncio.wait_for(self.loaded.wait(), self.wait_s)
                except TimeoutError:
                    return _error(500, 50002, "Schema registry is loading _schemas (offset "
                                  f"{self.registry.applied}); try again")
            return await handler(request)
        except RegistryError as e:
            return _reply(e.body(), e.status)
        except web.HTTPException:
            raise
        except Exception:
            log.exception("registry.failed", path=request.path)
            return _error(500, 50001, "Error in the backend data store (see the broker's log)")

    def _authorized(self, header: str | None) -> bool:
        assert self.users is not None
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, sep, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = self.users(user) if sep else None
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())

    async def start(self, sock: socket.socket, ssl_context: Any = None) -> None:
        self.runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self.runner.setup()
        await web.SockSite(self.runner, sock, ssl_context=ssl_context).start()
        self.port = sock.getsockname()[1]

    async def close(self) -> None:
        if self._replay is not None and not self._replay.done():
            self._replay.cancel()
        if self.runner is not None:
            await self.runner.cleanup()

    # -- routes --------------------------------------------------------------------------------
    async def root(self, request: web.Request) -> web.Response:
        return _reply({})

    async def metadata_id(self, request: web.Request) -> web.Response:
        # ServerMetadataResource: the Kafka cluster's id and the registry's group id (Confluent's
        # schema.registry.group.id default)
        clusters = {"schema-registry-cluster": "schema-registry"}
        if self.cluster_id is not None:
            clusters = {"kafka-cluster": self.cluster_id, **clusters}
        return _reply({"scope": {"path": [], "clusters": clusters}})

    async def types(self, request: web.Request) -> web.Response:
        from .formats.lookup import MODULES
        return _reply(list(MODULES))

    def _id(self, request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise RegistryError(404, 404, "HTTP 404 Not Found") from None

    def _found_at(self, schema_id: int, subject: str | None) -> Any:
        """The version an id is read from (AbstractSchemaRegistry.getSchemaKeyUsingContexts):
        ``subject``'s own when it has the id, else one of the others (the first by name here)."""
        found = self.registry.id_versions(schema_id, True)
        own = [sv for sv in found if sv[0] == subject]
        s, v = (own or found)[0]
        return self.registry.versions[s][v]

    async def schema_by_id(self, request: web.Request) -> web.Response:
        # ``subject=`` picks the context in Confluent and, when given, makes the answer name the
        # subject and version the id was read at (KafkaSchemaRegistry.get)
        schema_id = self._id(request)
        stored = self.registry.schema_by_id(schema_id)
        subject = request.query.get("subject")
        out = stored_json(stored, self._found_at(schema_id, subject), named=subject is not None)
        if _flag(request, "fetchMaxId"):
            out["maxId"] = self.registry.max_id  # idGenerator.getMaxId: the highest id given
        return _reply(out)

    async def schema_by_guid(self, request: web.Request) -> web.Response:
        # getByGuid answers the SchemaString without subject and version
        schema_id = self.registry.id_by_guid(request.match_info["guid"])
        stored = self.registry.schema_by_id(schema_id)
        return _reply(stored_json(stored, self._found_at(schema_id, None)))

    async def guid_ids(self, request: web.Request) -> web.Response:
        # listIdsForGuid: a ContextId per context holding it; an unknown guid is an empty list
        try:
            schema_id = self.registry.id_by_guid(request.match_info["guid"])
        except RegistryError:
            return _reply([])
        return _reply([{"context": ".", "id": schema_id}])

    async def contexts(self, request: web.Request) -> web.Response:
        # ContextsResource: the default context only, as no subject here is qualified
        return _reply(["."])

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        stored = self.registry.schema_by_id(self._id(request))
        return web.Response(text=stored.schema, content_type=CONTENT_TYPE)

    async def id_versions(self, request: web.Request) -> web.Response:
        found = self.registry.id_versions(self._id(request), _flag(request, "deleted"))
        return _reply(_page(request, [{"subject": s, "version": v} for s, v in found]))

    async def id_subjects(self, request: web.Request) -> web.Response:
        found = self.registry.id_versions(self._id(request), _flag(request, "deleted"))
        return _reply(_page(request, sorted({s for s, _v in found})))

    async def schemas(self, request: web.Request) -> web.Response:
        # SchemasResource.getSchemas: every version (``deleted`` adds the soft-deleted ones) of
        # the subjects with the prefix, by subject then version; ``latestOnly`` keeps each
        # subject's highest; pages of at most 1000
        found = self.registry.all_versions(request.query.get("subjectPrefix", ""),
                                           _flag(request, "deleted"), _flag(request, "latestOnly"))
        return _reply(_page(request, [schema_json(sv) for sv in found], 1000))

    async def subjects(self, request: web.Request) -> web.Response:
        return _reply(_page(request, self.registry.subjects(
            _flag(request, "deleted"), request.query.get("subjectPrefix", ""),
            _flag(request, "deletedOnly"))))

    async def versions(self, request: web.Request) -> web.Response:
        return _reply(_page(request, self.registry.version_list(
            request.match_info["subject"], _flag(request, "deleted"), _flag(request, "deletedOnly"),
            _flag(request, "deletedAsNegative"))))

    async def register(self, request: web.Request) -> web.Response:
        body = await _body(request)
        subject = request.match_info["subject"]
        _schema_id, version = self.registry.register(subject, body, _flag(request, "normalize"),
                                                     _flag(request, "force"))
        return _reply(register_json(self.registry.get_version(subject, version, True)))

    async def lookup(self, request: web.Request) -> web.Response:
        body = await _body(request)
        sv = self.registry.lookup(request.match_info["subject"], body, _flag(request, "normalize"),
                                  _flag(request, "deleted"))
        # Confluent answers a copy of the request's (canonicalized) schema with the subject,
        # version and id set (AbstractSchemaRegistry.lookUpSchemaUnderSubject): no ``ts`` nor
        # ``deleted``
        out = schema_json(sv)
        out.pop("ts", None)
        del out["deleted"]
        return _reply(out)

    async def version(self, request: web.Request) -> web.Response:
        sv = self.registry.get_version(request.match_info["subject"],
                                       parse_version(request.match_info["version"]),
                                       _flag(request, "deleted"))
        return _reply(schema_json(sv))

    async def version_schema(self, request: web.Request) -> web.Response:
        sv = self.registry.get_version(request.match_info["subject"],
                                       parse_version(request.match_info["version"]),
                                       _flag(request, "deleted"))
        return web.Response(text=sv.schema, content_type=CONTENT_TYPE)

    async def referenced_by(self, request: web.Request) -> web.Response:
        return _reply(_page(request, self.registry.referenced_by(
            request.match_info["subject"], parse_version(request.match_info["version"]),
            _flag(request, "deleted")), 1000))  # normalizeSchemaLimit

    async def delete_version(self, request: web.Request) -> web.Response:
        return _reply(self.registry.delete_version(request.match_info["subject"],
                                                   request.match_info["version"],
                                                   _flag(request, "permanent")))

    async def delete_subject(self, request: web.Request) -> web.Response:
        return _reply(self.registry.delete_subject(request.match_info["subject"],
                                                   _flag(request, "permanent")))

    async def compatibility(self, request: web.Request) -> web.Response:
        body = await _body(request)
        errors = self.registry.check_compatibility(request.match_info["subject"],
                                                   request.match_info.get("version"), body,
                                                   _flag(request, "normalize"), _flag(request, "verbose"))
        out: dict[str, Any] = {"is_compatible": not errors}
        if _flag(request, "verbose"):
            out["messages"] = errors
        return _reply(out)

    async def get_config(self, request: web.Request) -> web.Response:
        return _reply(self.registry.get_config(request.match_info.get("subject"),
                                               _flag(request, "defaultToGlobal")))

    async def put_config(self, request: web.Request) -> web.Response:
        return _reply(self.registry.set_config(request.match_info.get("subject"), await _body(request)))

    async def delete_config(self, request: web.Request) -> web.Response:
        return _reply(self.registry.delete_config(request.match_info.get("subject")))

    async def get_mode(self, request: web.Request) -> web.Response:
        return _reply(self.registry.get_mode(request.match_info.get("subject"),
                                             _flag(request, "defaultToGlobal")))

    async def put_mode(self, request: web.Request) -> web.Response:
        return _reply(self.registry.set_mode(request.match_info.get("subject"), await _body(request),
                                             _flag(request, "force")))

    async def delete_mode(self, request: web.Request) -> web.Response:
        return _reply(self.registry.delete_mode(request.match_info["subject"]))
