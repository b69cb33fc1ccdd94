"""The web console: ``/`` of the control listener.

Three static files (static/index.html, console.js, console.css, shipped in the wheel: no build
step, no CDN) and one JSON answer per poll:

    GET /                         the page; #/txn/<transactional id> is a transaction's timeline,
                                  #/share/<group>/<topic>/<partition> a share partition's records
    GET /static/{file}            its script and style
    GET /v1/console/overview      {"now_ms", "node_id", "cluster_id", "partitions", "groups",
                                  "telemetry"}
                                  ?internal=false leaves out __consumer_offsets and
                                  __transaction_state
    GET /v1/console/partitions    {"partitions": [...]}
    GET /v1/console/groups        {"groups": [...]}
    GET /v1/console/telemetry     {"served", "subscriptions", "clients"}: KIP-714 client
                                  instances and the metrics they pushed
    GET /v1/console/registry      the built-in Schema Registry's subjects and versions
                                  (registry_views.subjects); #/registry/<subject> shows one
    GET /v1/console/registry/diff ?subject=S&a=N&b=M: two versions of S and a unified diff

Transactions and their timelines come from /v1/transactions (txn_routes.py), share groups and
their records' stories from /v1/share (share_routes.py); the console polls about once a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from . import registry_views, views

STATIC = Path(__file__).parent / "static"
# Only these are served: a request names a file, never a path.
_FILES = {"console.js": "text/javascript", "console.css": "text/css", "index.html": "text/html"}
# The page changes with the broker's version; the browser must not keep an old one.
_NO_CACHE = {"Cache-Control": "no-cache"}


def _flag(request: web.Request, name: str, default: bool) -> bool:
    value = request.query.get(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise web.HTTPBadRequest(reason=f"{name} must be true or false")


def add_routes(router: Any, plane: Any) -> None:
    broker = plane.require_broker

    async def index(request: web.Request) -> web.StreamResponse:
        return _file("index.html")

    async def static(request: web.Request) -> web.StreamResponse:
        return _file(request.match_info["name"])

    async def overview(request: web.Request) -> web.Response:
        internal = _flag(request, "internal", True)
        return web.json_response(views.overview(broker(), plane.clock.wall_ms(), internal=internal))

    async def partitions(request: web.Request) -> web.Response:
        internal = _flag(request, "internal", True)
        return web.json_response({"partitions": views.partitions(broker(), internal=internal)})

    async def groups(request: web.Request) -> web.Response:
        return web.json_response({"groups": views.groups(broker())})

    async def telemetry(request: web.Request) -> web.Response:
        return web.json_response(views.telemetry(broker()))

    async def registry(request: web.Request) -> web.Response:
        return web.json_response(registry_views.subjects(broker()))

    async def registry_diff(request: web.Request) -> web.Response:
        subject = request.query.get("subject")
        try:
            a, b = int(request.query.get("a", "")), int(request.query.get("b", ""))
        except ValueError:
            raise web.HTTPBadRequest(reason="a and b must be version numbers") from None
        if not subject:
            raise web.HTTPBadRequest(reason="subject is required")
        found = registry_views.version_diff(broker(), subject, a, b)
        if found is None:
            return web.json_response({"error": f"no versions {a} and {b} of subject {subject}"}, status=404)
        return web.json_response(found)

    router.add_get("/", index)
    router.add_get("/static/{name}", static)
    router.add_get("/v1/console/overview", overview)
    router.add_get("/v1/console/partitions", partitions)
    router.add_get("/v1/console/groups", groups)
    router.add_get("/v1/console/telemetry", telemetry)
    router.add_get("/v1/console/registry", registry)
    router.add_get("/v1/console/registry/diff", registry_diff)


def _file(name: str) -> web.StreamResponse:
    content_type = _FILES.get(name)
    if content_type is None:
        raise web.HTTPNotFound(reason=f"no such file: {name}")
    try:
        body = (STATIC / name).read_bytes()
    except OSError:
        raise web.HTTPNotFound(reason=f"{name} is missing from the installed package") from None
    return web.Response(body=body, content_type=content_type, charset="utf-8", headers=_NO_CACHE)
