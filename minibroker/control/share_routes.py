"""The control plane's share-group routes: what `minibroker share explain --control` and the
console's share-group page read (share_views.py computes it).

    GET /v1/share/groups                              {"served", "note", "groups": [{"group_id",
                                                      "partitions": [{"topic", "partition", "live",
                                                      "in_flight": {state: records}, "deliveries",
                                                      "redeliveries", "archived", ...}]}]}
    GET /v1/share/{group}/{topic}/{partition}[?offset=N]
                                                      {"in_flight": [...], "records": [{"story",
                                                      "diagnosis", ...}], "summary", "text", "state"};
                                                      404 when neither the live partition nor the
                                                      history knows it

Group and topic go percent-encoded in the path (a group id may hold a ``/``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import share_views
from .replies import bad as _bad


def add_routes(router: web.UrlDispatcher, plane: Any) -> None:
    broker = plane.require_broker

    async def groups(request: web.Request) -> web.Response:
        return web.json_response(share_views.groups(broker()))

    async def partition(request: web.Request) -> web.Response:
        group, topic = request.match_info["group"], request.match_info["topic"]
        try:
            p = int(request.match_info["partition"])
            raw = request.query.get("offset")
            offset = int(raw) if raw not in (None, "") else None
        except ValueError:
            return _bad("partition and offset are integers")
        out = share_views.partition(broker(), group, topic, p, offset)
        if not out["known"]:
            what = f"offset {offset} of " if offset is not None else ""
            why = "" if share_views.served(broker()) else " (this broker runs no share coordinator)"
            return _bad(f"no share history for {what}group {group!r} on {topic}-{p}: never delivered there, "
                        f"or expired from the history{why}", 404)
        return web.json_response(out)

    router.add_get("/v1/share/groups", groups)
    router.add_get("/v1/share/{group}/{topic}/{partition}", partition)
