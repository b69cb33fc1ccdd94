"""The control plane's JSON answers to bad requests, shared by its route modules."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web


def bad(message: str, status: int = 400) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def json_body(request: web.Request) -> Any:
    text = await request.text()
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError as e:
        raise web.HTTPBadRequest(text=json.dumps({"error": f"the body is not JSON: {e}"}),
                                 content_type="application/json") from None
