"""GetTelemetrySubscriptions and PushTelemetry (KIP-714): registered only when client telemetry
is served (--client-telemetry), as Kafka advertises them only with a metrics receiver."""

from __future__ import annotations

import datetime
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build
from minibroker_protocol.errors import ErrorCode

from ..client_metrics.manager import ACCEPTED_COMPRESSION, ZERO_UUID, ClientMetricsManager, Refused
from .api import Api, RequestContext
from .common import ZERO, answers, response_cls


def client_attributes(ctx: RequestContext) -> dict[str, str | None]:
    """The attributes a subscription's ``match`` selects on (ClientMetricsInstanceMetadata)."""
    conn = ctx.connection
    peer = getattr(conn, "peer", None)
    software: tuple[str, str] = getattr(conn, "client_software", None) or ("unknown", "unknown")
    address = port = None
    if isinstance(peer, tuple) and len(peer) >= 2:
        address, port = str(peer[0]), str(peer[1])
    return {
        "client_id": ctx.client_id,
        "client_software_name": software[0],
        "client_software_version": software[1],
        "client_source_address": address,
        "client_source_port": port,
    }


class TelemetryHandlers:
    def __init__(self, *, client_metrics: ClientMetricsManager) -> None:
        self.metrics = client_metrics

    def apis(self) -> list[Api]:
        return [Api(ApiKey.GetTelemetrySubscriptions, 0, 0, self.get_subscriptions),
                Api(ApiKey.PushTelemetry, 0, 0, self.push)]

    @answers
    def get_subscriptions(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        try:
            inst = self.metrics.get_subscriptions(req.client_instance_id, client_attributes(ctx),
                                                  ctx.connection)
        except Refused as e:  # GetTelemetrySubscriptionsRequest.getErrorResponse: every field zero
            return build(R, throttle_time=ZERO, error_code=e.code, client_instance_id=ZERO_UUID,
                         subscription_id=0, accepted_compression_types=(), push_interval=ZERO,
                         telemetry_max_bytes=0, delta_temporality=False, requested_metrics=())
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, client_instance_id=inst.instance_id,
                     subscription_id=inst.subscription_id, accepted_compression_types=ACCEPTED_COMPRESSION,
                     push_interval=_ms(inst.interval_ms), telemetry_max_bytes=self.metrics.max_bytes,
                     delta_temporality=True, requested_metrics=inst.metrics)

    @answers
    def push(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        try:
            self.metrics.push(req.client_instance_id, req.subscription_id, req.terminating,
                              req.compression_type, req.metrics, client_attributes(ctx), ctx.connection)
        except Refused as e:
            return build(R, throttle_time=ZERO, error_code=e.code)
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none)


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)
