"""Small pieces every handler family shares."""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from minibroker_protocol import codec

from ..api import RequestContext, Response

ZERO = datetime.timedelta(0)

# Kafka's "authorized operations not requested" sentinel (Integer.MIN_VALUE)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

H = TypeVar("H")


def response_cls(ctx: RequestContext) -> Any:
    return codec.response_type(ctx.api_key, ctx.api_version)


def answers(method: Callable[[H, RequestContext, Any], Any]) -> Callable[[H, RequestContext, Any], Response]:
    """A handler method that builds its kio response entity, turned into one that answers a
    Response (the entity encoded for the request's correlation id)."""

    @functools.wraps(method)
    def handler(self: H, ctx: RequestContext, req: Any) -> Response:
        return Response.of(ctx.correlation_id, method(self, ctx, req))

    return handler


def advertised_endpoint(ctx: RequestContext, broker: Any) -> tuple[str, int]:
    """The address of this broker as the client's listener advertises it (Kafka answers
    Metadata/FindCoordinator per ``request.context.listenerName``)."""
    listener = getattr(ctx.connection, "listener", None)
    if listener is not None:
        return listener.advertised
    return broker.host, broker.port
