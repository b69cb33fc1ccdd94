"""The last requests the broker served, one record each, for the control plane to query.

Kept only while the control plane is on (``--control-listener``): a bounded ring of records
— API, version, client id and software, connection and peer, virtual broker, what the request
named (transactional ids, groups, topics), latency, the answer's error code (and Kafka's name
of it) and the fault rule that fired on it — so a test asks "which EndTxn versions did the Java
client send, and what did each get" instead of grepping logs. ``RequestCounts``
(request_counts.py) keeps the totals for ever; this keeps the detail of the last ``capacity``.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from minibroker_protocol.errors import ErrorCode

from ..cluster import connection_node
from .request_counts import api_name

DEFAULT_CAPACITY = 100_000


@dataclass(slots=True)
class RequestRecord:
    seq: int
    at_ms: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_software: str
    client_software_version: str
    conn: int | None
    peer: str | None
    broker: int
    transactional_ids: tuple[str, ...]
    groups: tuple[str, ...]
    topics: tuple[str, ...]
    fault: int | None = None
    latency_ms: float | None = None
    error_code: int | None = None
    outcome: str = "pending"  # answered | no_answer | disconnected | pending
    _t0: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "at_ms": self.at_ms, "api": api_name(self.api_key),
            "api_key": self.api_key, "api_version": self.api_version,
            "correlation_id": self.correlation_id, "client_id": self.client_id,
            "client_software_name": self.client_software,
            "client_software_version": self.client_software_version,
            "connection": self.conn, "peer": self.peer, "broker": self.broker,
            "transactional_ids": list(self.transactional_ids), "groups": list(self.groups),
            "topics": list(self.topics), "fault": self.fault, "latency_ms": self.latency_ms,
            "error_code": self.error_code, "error": error_name(self.error_code), "outcome": self.outcome,
        }


def error_name(code: int | None) -> str | None:
    """Kafka's name of an answer's error code (NOT_COORDINATOR), as its clients print it."""
    if code is None:
        return None
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def first_error(entity: Any, depth: int = 3) -> int:
    """The answer's top-level error code, else the first non-zero one of its entries."""
    code = getattr(entity, "error_code", None)
    if code:
        return int(code)
    for name in ("partition_error_code",):
        code = getattr(entity, name, None)
        if code:
            return int(code)
    if depth == 0:
        return 0
    for field in getattr(entity, "__dataclass_fields__", ()):
        value = getattr(entity, field)
        if isinstance(value, tuple):
            for item in value:
                if hasattr(item, "__dataclass_fields__"):
                    found = first_error(item, depth - 1)
                    if found:
                        return found
    return 0


class RequestLog:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, broker: int = 1) -> None:
        self.records: deque[RequestRecord] = deque(maxlen=capacity)
        self.broker = broker
        self._seq = itertools.count(1)

    def begin(self, ctx: Any, software: tuple[str, str], txn_ids: Iterable[str],
              groups: Iterable[str], topics: Iterable[str]) -> RequestRecord:
        conn = ctx.connection
        peer = getattr(conn, "peer", None)
        r = RequestRecord(
            seq=next(self._seq), at_ms=time.time_ns() // 1_000_000, api_key=ctx.api_key,
            api_version=ctx.api_version, correlation_id=ctx.correlation_id,
            client_id=ctx.client_id, client_software=software[0],
            client_software_version=software[1], conn=getattr(conn, "conn_id", None),
            peer=f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else None,
            broker=connection_node(ctx) or self.broker,
            transactional_ids=tuple(sorted(txn_ids)),
            groups=tuple(sorted(groups)), topics=tuple(sorted(topics)), _t0=time.perf_counter())
        self.records.append(r)
        return r

    @staticmethod
    def finish(r: RequestRecord, outcome: str, error_code: int | None = None) -> None:
        r.latency_ms = round((time.perf_counter() - r._t0) * 1000, 3)
        r.outcome = outcome
        r.error_code = error_code

    def query(self, api: int | None = None, client: str | None = None,
              transactional_id: str | None = None, group: str | None = None,
              topic: str | None = None, since: int = 0, limit: int | None = None) -> list[RequestRecord]:
        out = []
        for r in self.records:
            if r.seq <= since:
                continue
            if api is not None and r.api_key != api:
                continue
            if client is not None and client not in (r.client_id, r.client_software):
                continue
            if transactional_id is not None and transactional_id not in r.transactional_ids:
                continue
            if group is not None and group not in r.groups:
                continue
            if topic is not None and topic not in r.topics:
                continue
            out.append(r)
        return out[-limit:] if limit else out

    def clear(self) -> None:
        self.records.clear()
