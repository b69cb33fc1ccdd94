"""Small pieces every handler family shares."""

from __future__ import annotations

import datetime

from minibroker_protocol import codec

ZERO = datetime.timedelta(0)

# Kafka's "authorized operations not requested" sentinel (Integer.MIN_VALUE)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def response_cls(ctx):
    return codec.response_type(ctx.api_key, ctx.api_version)


def advertised_endpoint(ctx, broker) -> tuple[str, int]:
    """The address of this broker as the client's listener advertises it (Kafka answers
    Metadata/FindCoordinator per ``request.context.listenerName``)."""
    listener = getattr(ctx.connection, "listener", None)
    if listener is not None:
        return listener.advertised
    return broker.host, broker.port
