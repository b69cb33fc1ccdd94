"""What a handler sees and what it answers: the registration of an API, the typed request
context, the one response type the connection writes, and ``Disconnect`` (no answer: close)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minibroker_protocol import codec
from minibroker_protocol.api_keys import ApiKey


class Disconnect(Exception):
    """Raised by a handler (or a fault action) to close the connection instead of answering:
    ``reason`` names why in the broker's log."""

    def __init__(self, reason: str, detail: str, **fields: Any) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.fields = fields


@dataclass(slots=True)
class RequestContext:
    """What a handler knows of a request besides its body: header fields and connection."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    # The KafkaConnection (server.py); handlers read its ``listener``/``listeners``/``conn_id``.
    connection: Any


@dataclass(frozen=True, slots=True)
class Response:
    """An answer framed and ready to write, or none at all (``silent``: acks=0 Produce)."""

    chunks: Sequence[bytes | bytearray | memoryview]
    size: int  # bytes in ``chunks``; -1 when nothing is sent
    # The kio entity it was encoded from (None for hand-encoded answers): the request log
    # reads its error code; a reference, no copy.
    entity: Any = None
    # A hand-encoded answer's first non-zero error code (Fetch's per-partition codes), for the
    # request log and /metrics, which cannot read it from an entity.
    error_code: int = 0

    @classmethod
    def of(cls, correlation_id: int, entity: Any) -> Response:
        """A kio response entity, encoded with its response header."""
        data = codec.encode_response(correlation_id, entity)
        return cls((data,), len(data), entity)

    @classmethod
    def encoded(cls, chunks: Sequence[bytes | bytearray | memoryview], size: int,
                error_code: int = 0) -> Response:
        return cls(chunks, size, None, error_code)

    @property
    def silent(self) -> bool:
        return self.size < 0


NO_RESPONSE = Response((), -1)

Answer = Response | Awaitable[Response]
# ``req`` is the decoded kio request entity (its type differs per version) or what the
# Api's own decoder returns.
Handler = Callable[[RequestContext, Any], Answer]


@dataclass(frozen=True)
class Api:
    """One API key served: its version range and its handler (or the loader of its family)."""
    key: ApiKey
    min_version: int
    max_version: int
    # Answers a Response, or an awaitable of one (a request that waits: a long poll, a join).
    handler: Handler
    decoder: Callable[[Any, int], Any] | None = None  # custom body decoder (body, version) -> request
    # Set on a dispatcher's placeholder for a handler family not built yet
    # (Dispatcher.register_lazy): builds it and returns its Apis, which replace the placeholders.
    load: Callable[[], Sequence[Api]] | None = None
