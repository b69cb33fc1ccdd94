"""Client quotas: DescribeClientQuotas and AlterClientQuotas (KIP-546), and their enforcement as
Kafka's ClientQuotaManager and ClientRequestQuotaManager do it.

Enforcement (Kafka 4.4's core/src/main/scala/kafka/server/ClientQuotaManager.scala,
ClientRequestQuotaManager.scala and KafkaApis' produce and fetch callbacks):

- each request is measured on a sensor named by its (user, client id) metric tags
  (``ClientQuotas.metric_tags``: a quota on a user alone is shared by all its clients): the
  Produce request's size on ``producer_byte_rate``, the Fetch answer's size on
  ``consumer_byte_rate``, the time the handler took (percent of one thread-second per second)
  on ``request_percentage``;
- a sensor is Kafka's Rate over a SampledStat of ``quota.window.num`` (11) samples of
  ``quota.window.size.seconds`` (1 s); a recorded value that takes the rate over the bound
  throttles for (rate - bound) / bound * window, the window being at least 10 whole samples
  (Rate.windowSize), the request quota's throttle capped at one window;
- a throttled answer says so in ``throttle_time_ms`` (a throttled Fetch answers no records,
  and its bytes are taken back off the sensor), and the connection reads nothing more for that
  time (Kafka mutes the channel: KIP-219).

The user is the connection's principal name (``ANONYMOUS`` without SASL or TLS), as Kafka's
``session.sanitizedUser``.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from typing import Any

from minibroker_protocol import fetch as fetch_wire
from minibroker_protocol import produce as produce_wire
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ..cluster import connection_node
from ..config import client_quotas as cq
from .api import Api, RequestContext, Response
from .authz import OFF, Authz, Op
from .common import ZERO, answers, response_cls

log = get_logger("minibroker.quotas")

SAMPLES, WINDOW_MS = 11, 1000  # quota.window.num, quota.window.size.seconds
INACTIVE_SENSOR_MS = 3600 * 1000  # ClientQuotaManagerConfig.InactiveSensorExpirationTimeSeconds
NANOS_TO_PERCENT = 100.0 / 1e9  # ClientQuotaManagerConfig.NanosToPercentagePerSecond


class Rate:
    """Kafka's Rate over a SampledStat (clients/.../metrics/stats/Rate.java, SampledStat.java):
    samples start where their first value was recorded, not on a grid."""

    __slots__ = ("samples", "current", "last_ms")

    def __init__(self) -> None:
        self.samples: list[list[float]] = []  # [start ms, value]
        self.current = 0
        self.last_ms = 0.0

    def record(self, value: float, now_ms: float) -> None:
        self.last_ms = now_ms
        if not self.samples:
            self.samples.append([now_ms, 0.0])
        sample = self.samples[self.current]
        if now_ms - sample[0] >= WINDOW_MS:
            self.current = (self.current + 1) % SAMPLES
            if self.current >= len(self.samples):
                self.samples.append([now_ms, 0.0])
            else:
                self.samples[self.current] = [now_ms, 0.0]
            sample = self.samples[self.current]
        sample[1] += value

    def _purge(self, now_ms: float) -> None:
        for s in self.samples:
            if now_ms - s[0] >= SAMPLES * WINDOW_MS:
                s[0], s[1] = now_ms, 0.0

    def window_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        oldest = min((s[0] for s in self.samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // WINDOW_MS)
        if full < SAMPLES - 1:
            elapsed += (SAMPLES - 1 - full) * WINDOW_MS
        return elapsed

    def measure(self, now_ms: float) -> float:
        self._purge(now_ms)
        total = sum(s[1] for s in self.samples)
        return total / (self.window_ms(now_ms) / 1000.0)


class QuotaEnforcer:
    """The sensors of the three client quota types, over the quotas AlterClientQuotas set."""

    def __init__(self, quotas: cq.ClientQuotas, clock_ms: Any = None) -> None:
        self.quotas = quotas
        self.clock_ms = clock_ms if clock_ms is not None else (lambda: time.monotonic() * 1000.0)
        # by (quota, metric tags, virtual broker): each Kafka broker measures its own traffic
        self.sensors: dict[tuple[str, tuple[str, str], int | None], Rate] = {}
        self._records = 0

    @property
    def active(self) -> bool:
        return self.quotas.any

    def record(self, quota: str, user: str, client_id: str, value: float,
               now_ms: float | None = None, node: int | None = None) -> int:
        """Records ``value``; the throttle time in ms its sensor's rate now asks for (0: none)."""
        tags = self.quotas.metric_tags(quota, user, client_id)
        bound = self.quotas.limit(quota, tags)
        if bound is None:
            return 0
        now = self.clock_ms() if now_ms is None else now_ms
        sensor = self.sensors.get((quota, tags, node))
        if sensor is None or now - sensor.last_ms >= INACTIVE_SENSOR_MS:
            sensor = self.sensors[(quota, tags, node)] = Rate()
            self._expire(now)
        sensor.record(value, now)
        rate = sensor.measure(now)
        if rate <= bound:
            return 0
        ms = round((rate - bound) / bound * sensor.window_ms(now))
        if quota == cq.REQUEST_PERCENTAGE:
            # ClientRequestQuotaManager.throttleTime: QuotaUtils.boundedThrottleTime, one window at most
            ms = min(ms, WINDOW_MS)
        return max(0, int(ms))

    def unrecord(self, quota: str, user: str, client_id: str, value: float,
                 now_ms: float | None = None, node: int | None = None) -> None:
        """ClientQuotaManager.unrecordQuotaSensor: a throttled Fetch sends no records."""
        tags = self.quotas.metric_tags(quota, user, client_id)
        sensor = self.sensors.get((quota, tags, node))
        if sensor is not None:
            sensor.record(-value, self.clock_ms() if now_ms is None else now_ms)

    def max_fetch_bytes(self, ctx: RequestContext) -> int | None:
        """ClientQuotaManager.getMaxValueInQuotaWindow for consumer_byte_rate: the bound times
        the 10 whole windows (None: no quota applies)."""
        if not self.active:
            return None
        quota = cq.CONSUMER_BYTE_RATE
        bound = self.quotas.limit(quota, self.quotas.metric_tags(quota, user_of(ctx), ctx.client_id or ""))
        if bound is None:
            return None
        return int(min(bound * (SAMPLES - 1) * WINDOW_MS / 1000, 2**31 - 1))

    def _expire(self, now: float) -> None:
        # Kafka's sensors expire after an hour without a record
        self._records += 1
        if self._records % 1000 == 0:
            for k in [k for k, s in self.sensors.items() if now - s.last_ms >= INACTIVE_SENSOR_MS]:
                del self.sensors[k]

    # -- one request -------------------------------------------------------------------------
    def after(self, ctx: RequestContext, request_bytes: int, handler_ns: int, response: Response) -> Response:
        """The answer to a request the handler answered in ``handler_ns``, throttled when a quota
        asks for it (KafkaApis.handleProduceRequest, handleFetchRequest, sendResponseMaybeThrottle)."""
        user = user_of(ctx)
        client_id = ctx.client_id or ""
        api = ctx.api_key
        node = connection_node(ctx)
        now = self.clock_ms()
        bandwidth = 0
        if api == ApiKey.Produce:
            bandwidth = self.record(cq.PRODUCER_BYTE_RATE, user, client_id, request_bytes, now, node)
        elif api == ApiKey.Fetch and response.size >= 0:
            bandwidth = self.record(cq.CONSUMER_BYTE_RATE, user, client_id, response.size, now, node)
        request = 0
        if not (api == ApiKey.Produce and response.silent):  # acks=0 is not request-throttled
            request = self.record(cq.REQUEST_PERCENTAGE, user, client_id, handler_ns * NANOS_TO_PERCENT,
                                  now, node)
        ms = max(bandwidth, request)
        if ms <= 0:
            return response
        quota = (cq.PRODUCER_BYTE_RATE if api == ApiKey.Produce else cq.CONSUMER_BYTE_RATE) \
            if bandwidth > request else cq.REQUEST_PERCENTAGE
        if api == ApiKey.Fetch and response.size >= 0:
            # "unrecord" the fetched bytes: the answer carries none (KafkaApis.handleFetchRequest)
            self.unrecord(cq.CONSUMER_BYTE_RATE, user, client_id, response.size, now, node)
        return throttled(ctx, response, ms, quota=quota, user=user)


def user_of(ctx: RequestContext) -> str:
    principal = getattr(ctx.connection, "principal", None) or "User:ANONYMOUS"
    return principal.split(":", 1)[1] if ":" in principal else principal


def throttled(ctx: RequestContext, response: Response, ms: int, *, quota: str, user: str | None = None,
              rule: int | None = None) -> Response:
    """``response`` saying it was throttled for ``ms``, and the connection muted that long."""
    conn = ctx.connection
    log.info("quota.throttled", conn=getattr(conn, "conn_id", None), api=_api_name(ctx.api_key),
             correlation_id=ctx.correlation_id, client_id=ctx.client_id,
             user=user if user is not None else user_of(ctx), quota=quota, throttle_time_ms=ms, rule=rule)
    mute = getattr(conn, "throttle", None)
    if mute is not None:
        mute(ms)
    if response.silent:
        return response
    if ctx.api_key == ApiKey.Fetch and response.entity is None:
        # Kafka answers a throttled fetch with no data (FetchContext.getThrottledResponse)
        chunks, size = fetch_wire.encode_fetch_response(ctx.correlation_id, ctx.api_version, [],
                                                        throttle_ms=ms)
        return Response.encoded(chunks, size)
    if ctx.api_key == ApiKey.Produce and response.entity is None:
        # the hand-encoded Produce answer (minibroker_protocol.produce): the same answer, throttled
        data = produce_wire.with_throttle(bytes(response.chunks[0]), ctx.api_version, ms)
        return Response.encoded((data,), len(data), response.error_code)
    entity = response.entity
    if entity is not None and any(f.name == "throttle_time" for f in dataclasses.fields(entity)):
        return Response.of(ctx.correlation_id,
                           dataclasses.replace(entity, throttle_time=datetime.timedelta(milliseconds=ms)))
    return response


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:  # an API registered without a name here
        return str(key)


class QuotaHandlers:
    def __init__(self, *, quotas: cq.ClientQuotas, authz: Authz = OFF) -> None:
        self.quotas = quotas
        self.authz = authz

    def apis(self) -> list[Api]:
        return [Api(ApiKey.DescribeClientQuotas, 0, 1, self.describe_client_quotas),
                Api(ApiKey.AlterClientQuotas, 0, 1, self.alter_client_quotas)]

    @answers
    def describe_client_quotas(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Entry, Entity, Value = nested(R, "EntryData"), nested(R, "EntityData"), nested(R, "ValueData")
        if not self.authz.cluster(ctx, Op.DESCRIBE_CONFIGS):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         error_message=None, entries=None)
        try:
            found = self.quotas.describe([(c.entity_type, c.match_type, c.match) for c in req.components],
                                         req.strict)
        except cq.QuotaRefusal as e:
            return build(R, throttle_time=ZERO, error_code=e.code, error_message=e.message, entries=None)
        # Kafka 4.4 answers an empty message, not null, when all is well
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, error_message="", entries=tuple(
            build(Entry, entity=tuple(build(Entity, entity_type=t, entity_name=n) for t, n in entity),
                  values=tuple(build(Value, key=k, value=v) for k, v in values))
            for entity, values in found))

    @answers
    def alter_client_quotas(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        Entry, Entity = nested(R, "EntryData"), nested(R, "EntityData")
        given = [([(e.entity_type, e.entity_name) for e in entry.entity],
                  [(op.key, None if op.remove else float(op.value)) for op in entry.ops])
                 for entry in req.entries]
        results: list[tuple[cq.Key, ErrorCode, str | None]]
        if not self.authz.cluster(ctx, Op.ALTER_CONFIGS):
            results = [(cq.key_of(dict(entity)), ErrorCode.cluster_authorization_failed, None)
                       for entity, _ops in given]
        else:
            results = self.quotas.alter(given, req.validate_only)
        return build(R, throttle_time=ZERO, entries=tuple(
            build(Entry, error_code=code, error_message=message,
                  entity=tuple(build(Entity, entity_type=t, entity_name=n)
                               for t, n in cq.ordered_entity(key)))
            for key, code, message in results))
