"""The control plane's transaction routes: what `minibroker txn ... --control` and the web
console read (minibroker/coordinator/txn/inspect.py computes it).

    GET  /v1/transactions                       {"now_ms", "transactions": [...]} (the coordinator's view)
    GET  /v1/transactions/hanging[?max_age_ms=] {"hanging": [...]} (the partitions' view)
    POST /v1/transactions/abort                 {"topic", "partition", "start_offset"} or
                                                {"topic", "partition", "producer_id"[, "producer_epoch"]}
    GET  /v1/transactions/{id}/timeline         {"events", "story", "diagnosis", "lso_held", "text", "state"}
    GET  /v1/producers/{id}/timeline            {"producer_id", "events", "story", "diagnosis", "text"}
                                                (an idempotent producer id: init, refusals, duplicates)
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..coordinator.txn import inspect as txn_inspect
from .replies import bad as _bad
from .replies import json_body as _json_body


def add_routes(router: web.UrlDispatcher, plane: Any) -> None:
    broker = plane.require_broker

    async def list_(request: web.Request) -> web.Response:
        b = broker()
        return web.json_response({"now_ms": b.clock.wall_ms(),
                                  "transactions": txn_inspect.list_transactions(b)})

    async def hanging(request: web.Request) -> web.Response:
        raw = request.query.get("max_age_ms")
        try:
            max_age = int(raw) if raw else None
        except ValueError:
            return _bad("max_age_ms must be an integer")
        return web.json_response({"hanging": txn_inspect.hanging(broker(), max_age)})

    async def abort(request: web.Request) -> web.Response:
        body = await _json_body(request)
        if not isinstance(body, dict):
            return _bad('post {"topic", "partition", "start_offset"} or producer_id')
        try:
            topic = body["topic"]
            partition = int(body["partition"])
            ints = {k: int(body[k]) for k in ("start_offset", "producer_id", "producer_epoch")
                    if body.get(k) is not None}
        except (KeyError, TypeError, ValueError):
            return _bad('post {"topic", "partition", "start_offset"} or '
                        '{"topic", "partition", "producer_id"}')
        try:
            out = txn_inspect.abort(broker(), str(topic), partition, **ints)
        except txn_inspect.AbortError as e:
            return _bad(str(e), 404)
        return web.json_response(out, status=200 if out["error"] == "NONE" else 409)

    async def timeline(request: web.Request) -> web.Response:
        return web.json_response(txn_inspect.timeline(broker(), request.match_info["id"]))

    async def producer(request: web.Request) -> web.Response:
        try:
            pid = int(request.match_info["id"])
        except ValueError:
            return _bad("a producer id is an integer")
        return web.json_response(txn_inspect.producer_timeline(broker(), pid))

    router.add_get("/v1/transactions", list_)
    router.add_get("/v1/transactions/hanging", hanging)
    router.add_post("/v1/transactions/abort", abort)
    router.add_get("/v1/transactions/{id}/timeline", timeline)
    router.add_get("/v1/producers/{id}/timeline", producer)
