"""A share group's dead-letter queue (KIP-1191, ``share.version`` 2), as Kafka 4.4 writes it.

Theory of operation
-------------------
Kafka's ``SharePartition`` hands the records it would otherwise archive to the
``ShareGroupDLQManager`` when the group has ``errors.deadletterqueue.topic.name`` set and the
cluster finalized ``share.version`` >= 2 (``ShareVersion.supportsShareGroupDLQ``): records a
consumer REJECTed ("Offset rejected by client.") and records whose delivery count reached
``share.delivery.count.limit`` on their way back to AVAILABLE — RELEASE, lock expiry, member
gone ("Offset delivery count exceeded the threshold."). ``ShareGroupDLQStateManager`` (server/
src/main/java/org/apache/kafka/server/share/dlq/) then produces one record per offset to the DLQ
topic and the records become ARCHIVED whether or not that worked ("Failed to write to DLQ,
proceeding to ARCHIVED regardless.").

Each DLQ record (``ProduceRequestHandler.topicProduceData``/``headers``):

- goes to partition ``source partition % DLQ partitions``, uncompressed, acks=all;
- has the broker's clock as its CreateTime timestamp;
- has no key and no value, unless the group sets ``errors.deadletterqueue.copy.record.enable``:
  then the source record's key and value (not its headers or timestamp);
- carries the headers ``__dlq.errors.topic``, ``__dlq.errors.partition``,
  ``__dlq.errors.offset``, ``__dlq.errors.group``, ``__dlq.errors.delivery.count`` and
  ``__dlq.errors.message``, in that order, as UTF-8 text.

Before writing, ``validateDlqTopic`` refuses (logged, records archived anyway) a name starting
with ``__``, an existing topic without the topic config ``errors.deadletterqueue.group.enable``
= true, a missing topic while the broker's ``errors.deadletterqueue.auto.create.topics.enable``
is false (Kafka's default), and a name without the broker's
``errors.deadletterqueue.topic.name.prefix`` (default ``dlq.``). A missing topic with auto
creation on is created with the broker's default partition count and the configs
``errors.deadletterqueue.group.enable=true`` and ``message.timestamp.type=CreateTime``, as
``createTopicBuilder`` asks the controller.

Kafka writes asynchronously (the records sit in ARCHIVING meanwhile); here the append happens in
the same step that persists the records ARCHIVED, so there is no ARCHIVING state to recover.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from minibroker_protocol.batch import iter_headers
from minibroker_protocol.records import build_batch, decode_batch
from minibroker_storage.lazylog import get_logger

from ...core.clock import Clock
from .partition import HistoryEvent

log = get_logger(__name__)

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

TOPIC_NAME = "errors.deadletterqueue.topic.name"
COPY_RECORD = "errors.deadletterqueue.copy.record.enable"
TOPIC_ENABLE = "errors.deadletterqueue.group.enable"  # the DLQ topic's own config
DEFAULT_PREFIX = "dlq."  # GroupCoordinatorConfig.ERRORS_DEADLETTERQUEUE_TOPIC_NAME_PREFIX_DEFAULT
KeyValue = tuple[bytes | None, bytes | None]
# ShareGroupDLQStateManager.DLQ_MAX_FETCH_BYTES: how much of the source log one copy reads
COPY_READ_BYTES = 1 << 20


class DlqRefused(Exception):
    """validateDlqTopic's refusal, with Kafka's message."""


@dataclass(frozen=True)
class DlqEntry:
    """One ShareGroupDLQRecordParameter: a range of one source partition, with its cause."""
    first_offset: int
    last_offset: int
    delivery_count: int
    message: str


def entries(events: Sequence[HistoryEvent]) -> list[DlqEntry]:
    """The dead-letter entries among a partition write's events."""
    out = []
    for e in events:
        if e.dlq_cause is not None:
            out.append(DlqEntry(e.first_offset, e.last_offset, e.delivery_count, e.dlq_cause))
    return out


class DeadLetterQueues:
    """Writes what share groups archive to their DLQ topics.

    ``enabled()``: whether ``share.version`` >= 2 is finalized; ``group_config(group, name)``:
    the group's config; ``logs``: the log manager; ``notify(topic, partition)``: wakes fetches
    waiting on the DLQ partition; ``max_message_bytes(info)``: the DLQ topic's limit;
    ``create_topic(name, configs)``: creates a topic with the broker's defaults (None when
    the broker's ``errors.deadletterqueue.auto.create.topics.enable`` is false); ``prefix``:
    the broker's ``errors.deadletterqueue.topic.name.prefix``."""

    def __init__(self, *, logs: Any, clock: Clock, enabled: Callable[[], bool],
                 group_config: Callable[[str, str], str],
                 notify: Callable[[str, int], None] = lambda t, p: None,
                 max_message_bytes: Callable[[Any], int] = lambda info: 1048588,
                 create_topic: Callable[[str, dict[str, str]], None] | None = None,
                 prefix: str = DEFAULT_PREFIX) -> None:
        self.logs = logs
        self.clock = clock
        self.enabled = enabled
        self.group_config = group_config
        self.notify = notify
        self.max_message_bytes = max_message_bytes
        self.create_topic = create_topic
        self.prefix = prefix
        # per group, for /metrics (Kafka's ShareGroupMetrics DeadLetterQueueRecordCount and
        # DeadLetterQueueFailedProduceRequestsPerSec): records written, records given up on
        # (archived regardless)
        self.written: dict[str, int] = {}
        self.failed: dict[str, int] = {}

    def group_topic(self, group_id: str) -> str | None:
        """SharePartition.isDLQEnabledForGroup: the group's DLQ topic when it has one and
        share.version allows it."""
        if not self.enabled():
            return None
        name = self.group_config(group_id, TOPIC_NAME)
        return name or None

    def _validate(self, group_id: str, name: str) -> Any:
        """ProduceRequestHandler.validateDlqTopic, then the topic (created when allowed)."""
        if name.startswith("__"):
            raise DlqRefused(f"Configured DLQ topic name in share group: {group_id} cannot start "
                             f"with __, topic: {name}.")
        info = self.logs.topic(name)
        if info is not None and str((info.configs or {}).get(TOPIC_ENABLE, "false")).lower() != "true":
            raise DlqRefused(f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, "
                             f"topic: {name}.")
        if info is None and self.create_topic is None:
            raise DlqRefused(f"DLQ topic does not exist and auto create is disabled on cluster for "
                             f"share group: {group_id}, topic: {name}.")
        if self.prefix and not name.startswith(self.prefix):
            raise DlqRefused(f"Configured DLQ topic name does not comply with the DLQ topic prefix in "
                             f"share group: {group_id}, topic: {name}, prefix: {self.prefix}.")
        if info is None:
            assert self.create_topic is not None
            self.create_topic(name, {TOPIC_ENABLE: "true", "message.timestamp.type": "CreateTime"})
            info = self.logs.topic(name)
            if info is None:
                raise DlqRefused(f"DLQ topic {name} could not be created")
            log.info("share.dlq_topic_created", group=group_id, topic=name, partitions=info.partitions)
        return info

    def write(self, group_id: str, topic: str, partition: int, found: Sequence[DlqEntry]) -> str | None:
        """Append one DLQ record per offset of ``found`` (records of ``topic``-``partition``
        that ``group_id`` has just archived); a refusal or failure is logged and counted. The DLQ
        topic written to, or None."""
        name = self.group_topic(group_id)
        if name is None or not found:
            return None
        records = sum(e.last_offset - e.first_offset + 1 for e in found)
        try:
            info = self._validate(group_id, name)
            dest = partition % info.partitions
            plog = self.logs.get_log(name, dest)
            if plog is None:
                raise DlqRefused(f"DLQ topic partition {name}-{dest} is not available")
            copy = self.group_config(group_id, COPY_RECORD).lower() == "true"
            limit = self.max_message_bytes(info)
            for e in found:
                originals = self._originals(topic, partition, e) if copy else {}
                rows = [self._row(group_id, topic, partition, o, e, originals.get(o))
                        for o in range(e.first_offset, e.last_offset + 1)]
                for batch in _batches(rows, limit):
                    plog.append(batch, origin="coordinator")
            self.written[group_id] = self.written.get(group_id, 0) + records
            self.notify(name, dest)
            log.info("share.dlq_written", group=group_id, topic=topic, partition=partition,
                     dlq_topic=name, dlq_partition=dest, records=records)
            return str(name)
        except Exception as e:  # Kafka: "proceeding to ARCHIVED regardless"
            self.failed[group_id] = self.failed.get(group_id, 0) + records
            log.error("share.dlq_write_failed", group=group_id, topic=topic, partition=partition,
                      dlq_topic=name, records=records, reason=str(e),
                      action="records archived without a dead-letter copy, as Kafka does")
            return None

    def _row(self, group_id: str, topic: str, partition: int, offset: int, e: DlqEntry,
             original: KeyValue | None) -> dict[str, Any]:
        key, value = original if original is not None else (None, None)
        return {"key": key, "value": value, "timestamp": self.clock.wall_ms(), "headers": [
            (HEADER_TOPIC, topic.encode()), (HEADER_PARTITION, str(partition).encode()),
            (HEADER_OFFSET, str(offset).encode()), (HEADER_GROUP, group_id.encode()),
            (HEADER_DELIVERY_COUNT, str(e.delivery_count).encode()),
            (HEADER_MESSAGE, e.message.encode())]}

    def _originals(self, topic: str, partition: int, e: DlqEntry) -> dict[int, KeyValue]:
        """ShareGroupDLQRecordFetcher: the source records' keys and values in the range; an
        offset not found (compacted away, unreadable) gets a headers-only record, as Kafka's."""
        out: dict[int, KeyValue] = {}
        plog = self.logs.get_log(topic, partition)
        if plog is None:
            return out
        offset = max(e.first_offset, plog.log_start_offset)
        for _ in range(10_000):  # bounded: each pass moves past at least one batch
            if offset > e.last_offset or offset >= plog.high_watermark:
                break
            data, _after = plog.read_to(offset, COPY_READ_BYTES, upper_bound=plog.high_watermark)
            raw = bytes(data)
            last_seen = offset - 1
            for h in iter_headers(raw):
                if not h.is_control:  # control batches hold no source records
                    for r in decode_batch(raw, h.position):
                        if e.first_offset <= r.offset <= e.last_offset:
                            out[r.offset] = (r.key, r.value)
                last_seen = max(last_seen, h.last_offset)
            if last_seen < offset:
                break
            offset = last_seen + 1
        return out


def _batches(rows: list[dict[str, Any]], limit: int) -> list[bytes]:
    """The rows as uncompressed batches, each within ``limit`` bytes where one record allows
    (ProduceRequestHandler.topicProduceData cuts a round at max.message.bytes)."""
    out: list[bytes] = []
    pending = [rows]
    for _ in range(len(rows) * 2 + 1):
        if not pending:
            break
        chunk = pending.pop(0)
        batch = build_batch(chunk)
        if len(batch) <= limit or len(chunk) == 1:
            out.append(batch)
        else:
            half = len(chunk) // 2
            pending[:0] = [chunk[:half], chunk[half:]]
    return out
