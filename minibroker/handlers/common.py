"""Small pieces every handler family shares."""

from __future__ import annotations

import datetime
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from minibroker_protocol import codec
from minibroker_storage.catalog import TopicInfo
from minibroker_storage.log import PartitionLog
from minibroker_storage.manager import LogManager

from .api import RequestContext, Response

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


def answers_later(
    method: Callable[[H, RequestContext, Any], Awaitable[Any]],
) -> Callable[[H, RequestContext, Any], Awaitable[Response]]:
    """:func:`answers` for a coroutine method (a request that waits, as JoinGroup does)."""

    @functools.wraps(method)
    async def handler(self: H, ctx: RequestContext, req: Any) -> Response:
        return Response.of(ctx.correlation_id, await method(self, ctx, req))

    return handler


def partition_log(logs: LogManager, topic: str, partition: int) -> PartitionLog:
    """The log of a partition the caller has just found in the topic catalog."""
    plog = logs.get_log(topic, partition)
    if plog is None:  # the caller checked the partition against the topic's count
        raise LookupError(f"no log for {topic}-{partition}")
    return plog


class CreateTopic(Protocol):
    """Broker.create_topic: a topic made with the broker's defaults, logged with why."""

    def __call__(self, name: str, partitions: int, configs: dict[str, str] | None = ...,
                 reason: str = ..., replication_factor: int = ...,
                 assignments: dict[int, list[int]] | None = ...) -> TopicInfo: ...


# The broker's own advertised (host, port), read per request: it is known only once the
# first listener is bound (Broker.set_bound_port).
Endpoint = Callable[[], tuple[str, int]]


def advertised_endpoint(ctx: RequestContext, default: Endpoint) -> tuple[str, int]:
    """The address of this broker as the client's listener advertises it (Kafka answers
    Metadata/FindCoordinator per ``request.context.listenerName``)."""
    listener = getattr(ctx.connection, "listener", None)
    if listener is not None:
        return listener.advertised
    return default()


def by_partition(topics: Any, name: Callable[[Any], str], answer: Callable[[str, Any], Any],
                 topic_answer: Callable[[str, tuple], Any]) -> tuple:
    """One answer per partition asked, grouped by topic in the order asked (the shape of
    DeleteRecords', OffsetForLeaderEpoch's and ElectLeaders' answers)."""
    return tuple(topic_answer(name(t), tuple(answer(name(t), p) for p in t.partitions)) for t in topics)
