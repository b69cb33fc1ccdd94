"""What clients pushed (PushTelemetry): the broker's own receiver of KIP-714 metrics.

Kafka hands pushed payloads to a ClientTelemetryReceiver plugin and keeps nothing; minibroker
is its own receiver and keeps, per client instance, the last value of each metric series (and,
for delta sums, the running total since the first push), so the console can show them.
Bounded: the last 1,000 instances, 2,000 series each.
"""

from __future__ import annotations

import math
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from minibroker_protocol.otlp import MetricPoint, TelemetryPayloadError, decode
from minibroker_storage.lazylog import get_logger

from ..core.clock import Clock
from .manager import kafka_uuid_text

log = get_logger("minibroker.telemetry")

MAX_CLIENTS = 1000
MAX_SERIES = 2000


@dataclass
class Series:
    point: MetricPoint
    total: float | None  # delta sums: the sum of every delta pushed


@dataclass
class Pushed:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    resource: dict[str, str] = field(default_factory=dict)
    series: dict[tuple[str, tuple], Series] = field(default_factory=dict)
    pushes: int = 0
    bytes: int = 0
    last_push_ms: int = 0
    terminated: bool = False


class ReceivedMetrics:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.clients: OrderedDict[uuid.UUID, Pushed] = OrderedDict()

    def receive(self, instance: Any, compression_type: int, data: bytes) -> None:
        """The ClientMetricsManager's receiver: ValueError (INVALID_RECORD) if undecodable."""
        try:
            payload = decode(compression_type, data)
        except TelemetryPayloadError as e:
            log.info("telemetry.payload_refused", client_instance_id=kafka_uuid_text(instance.instance_id),
                     client_id=instance.attributes.get("client_id"), reason=str(e))
            raise ValueError(str(e)) from None
        p = self.clients.get(instance.instance_id)
        if p is None:
            p = self.clients[instance.instance_id] = Pushed(instance.instance_id, dict(instance.attributes))
            while len(self.clients) > MAX_CLIENTS:
                self.clients.popitem(last=False)
        self.clients.move_to_end(instance.instance_id)
        p.resource.update(payload.resource)
        p.pushes += 1
        p.bytes += len(data)
        p.last_push_ms = self.clock.wall_ms()
        p.terminated = bool(instance.terminating)
        for point in payload.points:
            key = (point.name, point.attributes)
            old = p.series.get(key)
            if old is None and len(p.series) >= MAX_SERIES:
                continue
            total = None
            if point.kind == "sum" and point.delta and point.value is not None:
                prev = old.total if old is not None and old.total is not None else 0.0
                total = point.value + prev
            p.series[key] = Series(point, total)

    def view(self, instance_id: uuid.UUID) -> dict[str, Any] | None:
        p = self.clients.get(instance_id)
        return None if p is None else pushed_json(p)

    def all(self) -> list[dict[str, Any]]:
        return [pushed_json(p) for p in reversed(self.clients.values())]


def client_identity(instance_id: uuid.UUID, attributes: dict[str, str | None]) -> dict[str, Any]:
    """Who a client instance is, as the console shows it."""
    software = (attributes.get("client_software_name"), attributes.get("client_software_version"))
    return {
        # as Kafka prints a Uuid (base64url), what clientInstanceId() shows the application
        "client_instance_id": kafka_uuid_text(instance_id),
        "client_id": attributes.get("client_id"),
        "software": "/".join(x for x in software if x) or None,
        "address": attributes.get("client_source_address"),
    }


def pushed_json(p: Pushed) -> dict[str, Any]:
    return {
        **client_identity(p.instance_id, p.attributes),
        "resource": p.resource,
        "pushes": p.pushes,
        "bytes": p.bytes,
        "last_push_ms": p.last_push_ms,
        "terminated": p.terminated,
        "metrics": [
            {"name": s.point.name, "kind": s.point.kind, "attributes": dict(s.point.attributes),
             "value": _finite(s.point.value), "count": s.point.count, "total": _finite(s.total),
             "delta": s.point.delta, "time_ms": s.point.time_ms}
            for _, s in sorted(p.series.items(), key=lambda kv: (kv[0][0], kv[0][1]))
        ],
    }


def _finite(v: float | None) -> float | None:
    """NaN and infinities (an average over no samples) as null: JSON has no NaN."""
    return v if v is None or math.isfinite(v) else None
