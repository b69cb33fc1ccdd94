"""The client instances of KIP-714 and the rules of GetTelemetrySubscriptions and PushTelemetry.

Theory of operation (Kafka: server/.../ClientMetricsManager.java, ClientMetricsInstance.java).
A client asks GetTelemetrySubscriptions with a zero id and is given a client instance id; the
broker keeps an *instance* for it: the client's attributes (id, KIP-511 software, address,
port), the metric prefixes and push interval of every subscription whose ``match`` fits those
attributes, and a subscription id (CRC32C of that set and interval, XOR the instance id's
hash), so a push names the subscription it was made for. Each instance may ask or push once
per interval (a push right after a Get is always allowed, since clients jitter their
interval); earlier requests are refused with THROTTLING_QUOTA_EXCEEDED. When a subscription
changes, every instance is re-evaluated on its next request and may ask again at once. A push
naming another subscription id gets UNKNOWN_SUBSCRIPTION_ID (the client then asks again); a
push after one marked ``terminating`` is INVALID_REQUEST. An instance is forgotten when the
connection that made it closes, or max(60 s, 3 intervals) after its last request.

What Kafka forgets, the console still tells: a forgotten instance is kept (the last 1,000) with
when and why it went, and every instance counts the GetTelemetrySubscriptions and PushTelemetry
requests it made, answered or refused. A client that asked while no subscription matched it
(asked for nothing, pushes nothing) is still a client that asked, so the console's list of
clients agrees with ``minibroker requests --counts``.

No I/O: the clock, the receiver of pushed payloads and the store of subscriptions are passed in.
"""

from __future__ import annotations

import base64
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minibroker_protocol import checksum
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.lazylog import get_logger

from ..core.clock import Clock
from ..core.java_hash import java_string_hash
from . import configs as cfg

log = get_logger("minibroker.telemetry")

# Kafka's compression types in the order its broker offers them (ClientMetricsManager)
ACCEPTED_COMPRESSION = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
KNOWN_COMPRESSION = range(0, 5)      # CompressionType ids: none, gzip, snappy, lz4, zstd
CACHE_MAX = 16384                    # Kafka's instance cache (16k client connections)
MIN_EXPIRY_MS = 60_000
FORGOTTEN_MAX = 1000                 # instances gone, kept for the console (as ReceivedMetrics)
ZERO_UUID = uuid.UUID(int=0)
RESERVED = (ZERO_UUID, uuid.UUID(int=1))  # Uuid.RESERVED: ZERO_UUID and METADATA_TOPIC_ID


class Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    subscription_id: int
    version: int
    metrics: tuple[str, ...]
    interval_ms: int
    connection: Any = None
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    expires_ms: int = 0
    created_ms: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    gets: int = 0      # GetTelemetrySubscriptions requests, answered or refused
    pushes: int = 0    # PushTelemetry requests, answered or refused
    gone_ms: int | None = None
    gone_reason: str | None = None  # "disconnected" or "expired", once forgotten

    def may_get(self, now: int) -> bool:
        if now - max(self.last_get_ms, self.last_push_ms) >= self.interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: int) -> bool:
        if self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.interval_ms:
            self.last_push_ms = now
            return True
        return False


Receiver = Callable[[ClientInstance, int, bytes], None]


class ClientMetricsManager:
    def __init__(self, *, clock: Clock, max_bytes: int, receiver: Receiver | None = None,
                 subscriptions: dict[str, dict[str, str]] | None = None,
                 save: Callable[[dict[str, dict[str, str]]], None] | None = None) -> None:
        self.clock = clock
        self.max_bytes = max_bytes
        self.receiver = receiver
        self._save = save
        self.configs: dict[str, dict[str, str]] = {}
        self.subscriptions: dict[str, cfg.Subscription] = {}
        for name, c in (subscriptions or {}).items():
            try:
                self.subscriptions[name] = cfg.parse(name, c)
                self.configs[name] = dict(c)
            except cfg.SubscriptionError as e:  # a hand-edited file: skip it, never fail start-up
                log.warning("telemetry.subscription_skipped", subscription=name, reason=str(e))
        self.version = 0
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self.forgotten: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    # -- subscriptions (IncrementalAlterConfigs on CLIENT_METRICS resources) ----------------
    def alter(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace a subscription's configs (no configs left: remove it); SubscriptionError if bad."""
        sub = cfg.parse(name, configs)
        if validate_only:
            return
        if not configs:
            if self.subscriptions.pop(name, None) is None:
                return
            self.configs.pop(name, None)
            log.info("telemetry.subscription_removed", subscription=name)
        else:
            self.subscriptions[name] = sub
            self.configs[name] = dict(configs)
            log.info("telemetry.subscription_set", subscription=name, metrics=list(sub.metrics),
                     interval_ms=sub.interval_ms, match=configs.get(cfg.MATCH, ""))
        self.version += 1
        if self._save is not None:
            self._save(dict(self.configs))

    # -- GetTelemetrySubscriptions -------------------------------------------------------
    def get_subscriptions(self, instance_id: uuid.UUID | None, client: dict[str, str | None],
                          connection: Any = None) -> ClientInstance:
        now = self.clock.wall_ms()
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = self._new_id()
        inst = self._instance(instance_id, client, connection, now)
        inst.gets += 1
        if not inst.may_get(now):
            self._refuse(inst, "get", ErrorCode.throttling_quota_exceeded,
                         f"Request from the client [{instance_id}] arrived before the next push "
                         "interval time")
        return inst

    # -- PushTelemetry -------------------------------------------------------------------
    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool,
             compression_type: int, metrics: bytes, client: dict[str, str | None],
             connection: Any = None) -> ClientInstance:
        if instance_id is None or instance_id in RESERVED:
            raise Refused(ErrorCode.invalid_request,
                          f"Invalid request from the client [{instance_id}], invalid client instance id")
        now = self.clock.wall_ms()
        inst = self._instance(instance_id, client, connection, now)
        inst.pushes += 1
        try:
            self._check_push(inst, subscription_id, terminating, compression_type, metrics, now)
        finally:
            inst.terminating = terminating
        if metrics and self.receiver is not None:
            try:
                self.receiver(inst, compression_type, metrics)
            except ValueError as e:
                self._refuse(inst, "push", ErrorCode.invalid_record, str(e))
        return inst

    def _check_push(self, inst: ClientInstance, subscription_id: int, terminating: bool,
                    compression_type: int, metrics: bytes, now: int) -> None:
        iid = inst.instance_id
        if inst.terminating:
            self._refuse(inst, "push", ErrorCode.invalid_request,
                         f"Client [{iid}] sent the previous request with state terminating to TRUE, can not "
                         "acceptany requests after that")  # sic: Kafka's message
        if not inst.may_push(now) and not terminating:
            self._refuse(inst, "push", ErrorCode.throttling_quota_exceeded,
                         f"Request from the client [{iid}] arrived before the next push interval time")
        if subscription_id != inst.subscription_id:
            self._refuse(inst, "push", ErrorCode.unknown_subscription_id,
                         f"Unknown client subscription id for the client [{iid}]")
        if compression_type not in KNOWN_COMPRESSION:
            self._refuse(inst, "push", ErrorCode.unsupported_compression_type,
                         f"Unknown compression type [{compression_type}] is received in telemetry request "
                         f"from [{iid}]")
        if metrics is not None and len(metrics) > self.max_bytes:
            self._refuse(inst, "push", ErrorCode.telemetry_too_large,
                         f"Telemetry request from [{iid}] is larger than the maximum allowed size "
                         f"[{self.max_bytes}]")

    def _refuse(self, inst: ClientInstance, what: str, code: ErrorCode, message: str) -> None:
        inst.refused[code.name] = inst.refused.get(code.name, 0) + 1
        log.info("telemetry.refused", request=what, client_instance_id=kafka_uuid_text(inst.instance_id),
                 client_id=inst.attributes.get("client_id"), error=code.name, reason=message)
        raise Refused(code, message)

    # -- instances ---------------------------------------------------------------------
    def live(self) -> list[ClientInstance]:
        self._expire(self.clock.wall_ms())
        return list(self.instances.values())

    def gone(self) -> list[ClientInstance]:
        """Instances forgotten (disconnected or expired), the most recently gone first."""
        self._expire(self.clock.wall_ms())
        return list(reversed(self.forgotten.values()))

    def _instance(self, iid: uuid.UUID, client: dict[str, str | None], connection: Any,
                  now: int) -> ClientInstance:
        self._expire(now)
        inst = self.instances.get(iid)
        if inst is None or inst.version < self.version:
            attributes = inst.attributes if inst is not None else {
                **client, cfg.CLIENT_INSTANCE_ID: str(iid)}
            # a client back with the id it was given (on a new connection) is a new instance to
            # Kafka, the same client to the console
            old = inst if inst is not None else self.forgotten.pop(iid, None)
            inst = self._evaluate(iid, attributes, now)
            inst.connection = connection
            if old is not None:  # what the console shows survives a re-evaluation
                inst.created_ms, inst.refused = old.created_ms, old.refused
                inst.gets, inst.pushes = old.gets, old.pushes
            self.instances[iid] = inst
            while len(self.instances) > CACHE_MAX:
                self.instances.popitem(last=False)
        self.instances.move_to_end(iid)
        inst.expires_ms = now + max(MIN_EXPIRY_MS, 3 * inst.interval_ms)
        return inst

    def _evaluate(self, iid: uuid.UUID, attributes: dict[str, str | None], now: int) -> ClientInstance:
        interval = cfg.DEFAULT_INTERVAL_MS
        metrics: dict[str, None] = {}
        everything = False
        for sub in self.subscriptions.values():
            if sub.matches(attributes):
                everything = everything or cfg.ALL_METRICS in sub.metrics
                metrics.update(dict.fromkeys(java_hash_set_order(sub.metrics)))
                interval = min(interval, sub.interval_ms)
        chosen = (cfg.ALL_METRICS,) if everything else java_hash_set_order(metrics)
        return ClientInstance(iid, attributes, subscription_id(chosen, interval, iid), self.version,
                              chosen, interval, created_ms=now)

    def _expire(self, now: int) -> None:
        # A closed connection's instances go as Kafka's ClientConnectionDisconnectListener
        # removes them; noticed here, on the next request or listing, which no one can tell apart.
        for iid in [i for i, inst in self.instances.items()
                    if inst.expires_ms <= now or getattr(inst.connection, "closed", False)]:
            inst = self.instances.pop(iid)
            inst.gone_ms = now
            inst.gone_reason = "expired" if inst.expires_ms <= now else "disconnected"
            inst.connection = None  # the connection object goes with it
            self.forgotten[iid] = inst
            while len(self.forgotten) > FORGOTTEN_MAX:
                self.forgotten.popitem(last=False)

    def _new_id(self) -> uuid.UUID:
        while True:  # Uuid.randomUuid: never reserved, never a base64 form starting with '-'
            u = uuid.uuid4()
            if (u not in RESERVED and u not in self.instances and u not in self.forgotten
                    and not kafka_uuid_text(u).startswith("-")):
                return u


def kafka_uuid_text(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def java_hash_set_order(items) -> tuple[str, ...]:
    """The iteration order of a java.util.HashSet<String> holding these strings (added in this
    order): by bucket of the spread hash in the smallest table that holds them, insertion order
    within a bucket. Kafka prints the set into the subscription id and lists it in that order."""
    items = list(dict.fromkeys(items))
    n = 16
    while len(items) > n * 3 // 4:
        n *= 2

    def bucket(s: str) -> int:
        h = java_string_hash(s) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (n - 1)
    return tuple(sorted(items, key=bucket))


def subscription_id(metrics: tuple[str, ...], interval_ms: int, iid: uuid.UUID) -> int:
    """ClientMetricsManager.computeSubscriptionId: CRC32C of the set as Java prints it and the
    interval, XOR the instance id's hashCode, as a signed int32."""
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    crc = checksum.crc32c(text.encode())
    bits = iid.int
    h = ((bits >> 64) ^ bits) & 0xFFFFFFFFFFFFFFFF
    uuid_hash = ((h >> 32) ^ h) & 0xFFFFFFFF
    v = crc ^ uuid_hash
    return v - (1 << 32) if v >= 1 << 31 else v
