"""Small pieces every handler family shares."""

from __future__ import annotations

import datetime

from protocol import codec

ZERO = datetime.timedelta(0)

# Kafka's "authorized operations not requested" sentinel (Integer.MIN_VALUE)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def response_cls(ctx):
    return codec.response_type(ctx.api_key, ctx.api_version)
