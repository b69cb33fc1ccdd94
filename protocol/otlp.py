"""KIP-714 telemetry payloads: PushTelemetry's ``metrics`` bytes, decompressed and decoded.

A client pushes an OpenTelemetry ``MetricsData`` protobuf (OTLP v1), compressed with one of
the record-batch codecs (PushTelemetry's ``compression_type``: Java compresses it as it
compresses a batch, ClientTelemetryUtils.compress). The OpenTelemetry project's generated
classes parse it; they are imported on the first push, never on the start-up path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import decompress


class TelemetryPayloadError(ValueError):
    """The bytes are not a compressed OTLP MetricsData."""


@dataclass(frozen=True, slots=True)
class MetricPoint:
    name: str
    kind: str                   # sum, gauge, histogram, exponential_histogram, summary
    attributes: tuple[tuple[str, str], ...]
    value: float | None         # a histogram's or summary's sum
    count: int | None           # a histogram's or summary's count
    time_ms: int
    delta: bool                 # AGGREGATION_TEMPORALITY_DELTA (a sum or histogram)
    monotonic: bool


@dataclass(frozen=True, slots=True)
class TelemetryPayload:
    resource: tuple[tuple[str, str], ...]
    points: tuple[MetricPoint, ...]


_DELTA = 1  # AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


def decode(compression_type: int, data: bytes) -> TelemetryPayload:
    try:
        raw = decompress(compression_type, data) if compression_type else bytes(data)
    except Exception as e:  # each codec raises its own error type
        raise TelemetryPayloadError(f"cannot decompress (compression type {compression_type}): {e}") from None
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    msg = MetricsData()
    try:
        msg.ParseFromString(raw)
    except DecodeError as e:
        raise TelemetryPayloadError(f"not an OTLP MetricsData: {e}") from None
    resource: dict[str, str] = {}
    points: list[MetricPoint] = []
    for rm in msg.resource_metrics:
        resource.update(_attributes(rm.resource.attributes))
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                points.extend(_points(m))
    return TelemetryPayload(tuple(sorted(resource.items())), tuple(points))


def _points(m: Any) -> list[MetricPoint]:
    kind = m.WhichOneof("data")
    if kind is None:
        return []
    data = getattr(m, kind)
    delta = getattr(data, "aggregation_temporality", 0) == _DELTA
    monotonic = bool(getattr(data, "is_monotonic", False))
    out = []
    for p in data.data_points:
        if kind in ("sum", "gauge"):
            which = p.WhichOneof("value")
            value: float | None = float(getattr(p, which)) if which else None
            count = None
        else:
            value = float(p.sum) if kind == "summary" or p.HasField("sum") else None
            count = int(p.count)
        out.append(MetricPoint(m.name, kind, tuple(sorted(_attributes(p.attributes).items())), value,
                               count, p.time_unix_nano // 1_000_000, delta, monotonic))
    return out


def _attributes(kvs: Any) -> dict[str, str]:
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = "" if which is None else str(getattr(kv.value, which))
    return out
