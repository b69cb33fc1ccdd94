"""Online reads through confluent-kafka (librdkafka), from minibroker or any Kafka broker.

Planner side: partitions from Metadata, watermarks from ListOffsets. librdkafka sends
ListOffsets with the consumer's ``isolation.level`` (rd_kafka_ListOffsetsRequest in
librdkafka's src/rdkafka_request.c passes ``rk_conf.isolation_level``), and Kafka answers
LATEST with the LSO under READ_COMMITTED, so ``get_watermark_offsets(cached=False)`` of a
read_committed consumer returns (log start, LSO) - the end a read_committed query plans.

Reader side: one consumer per range, assigned at the range's start. librdkafka drops
control records and, under read_committed, aborted batches; the offsets they occupy are
never returned as messages, so the last offsets before the planned end may never arrive.
The reader therefore stops on whichever comes first: a message at or past the end, the
consumer's position (which librdkafka moves past control records as well) reaching the
end, or a partition-EOF event whose offset (librdkafka's fetch position, past aborted
batches too) reaches it. Only offsets below ``r.end`` are ever returned, so the records
of a range do not depend on which of these ends it. Every wait is bounded by
``kafkaConsumer.pollTimeoutMs`` without progress.
"""

from __future__ import annotations

import re
import time

from minibroker_protocol.topics import INTERNAL_TOPICS
from minibroker_storage.lazylog import get_logger

from .offsets import DataLoss, OffsetRange, TopicPartition, Watermarks
from .options import SourceOptions
from .schema import CREATE_TIME, LOG_APPEND_TIME, ROWS_PER_BATCH, RowBuffer

log = get_logger(__name__)

_METADATA_TIMEOUT = 30.0
_CONSUME_BATCH = 2000
_CONSUME_WAIT = 0.5


class KafkaPlanner:
    """Driver side: partitions and watermarks through one long-lived client."""

    def __init__(self, options: SourceOptions) -> None:
        from confluent_kafka import Consumer

        self.options = options
        self._consumer = Consumer(options.consumer_config())

    def close(self) -> None:
        self._consumer.close()

    def aborted_for(self, r: OffsetRange) -> tuple:
        return ()  # the broker's fetch path hands librdkafka the aborted transactions

    def partitions(self) -> list[TopicPartition]:
        o = self.options
        if o.assign:
            return sorted(o.assign)
        # All topics, not list_topics(topic=...): naming a topic may auto-create it.
        md = self._consumer.list_topics(timeout=_METADATA_TIMEOUT)
        out: list[TopicPartition] = []
        for name, t in md.topics.items():
            if t.error is not None:
                continue
            if o.pattern is not None:
                if name in INTERNAL_TOPICS or not re.fullmatch(o.pattern, name):
                    continue
            elif name not in o.subscribe:
                continue
            out.extend((name, p) for p in t.partitions)
        return sorted(out)

    def watermarks(self, tps):
        from confluent_kafka import TopicPartition as KTP

        out = {}
        for topic, partition in tps:
            low, high = self._consumer.get_watermark_offsets(KTP(topic, partition),
                                                             timeout=_METADATA_TIMEOUT, cached=False)
            out[(topic, partition)] = Watermarks(low, high)
        return out


def read_range(options: SourceOptions, r: OffsetRange):
    """Yield the records of ``r`` as Arrow batches, stopping exactly at ``r.end``."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP

    rows = RowBuffer(r.topic, r.partition, options.include_headers)
    consumer = Consumer(options.consumer_config())
    tp = KTP(r.topic, r.partition, r.start)
    limit = options.poll_timeout_ms / 1000.0
    try:
        consumer.assign([tp])
        position = r.start
        last_progress = time.monotonic()
        while position < r.end:
            # Whatever is queued, without waiting; consume() with a timeout would wait it out
            # whenever fewer than a full batch are left. poll() returns on the first event.
            messages = consumer.consume(_CONSUME_BATCH, 0)
            if not messages:
                m = consumer.poll(_CONSUME_WAIT)
                messages = [m] if m is not None else []
            before = position
            for m in messages:
                err = m.error()
                if err is not None:
                    position = _on_error(consumer, m, r, position, options.fail_on_data_loss)
                    if position >= r.end:
                        break
                    continue
                offset = m.offset()
                # confluent-kafka types it Optional, but only error events lack an offset.
                assert offset is not None
                if offset >= r.end:
                    position = r.end
                    break
                if offset < position:
                    continue  # already returned; never expected, but never twice
                ts_kind, ts = m.timestamp()
                rows.add(m.key(), m.value(), offset, ts,
                         LOG_APPEND_TIME if ts_kind == 2 else CREATE_TIME,
                         m.headers() if options.include_headers else None)
                position = offset + 1
            if position < r.end:
                # Past trailing control records and aborted batches the messages never show.
                (now,) = consumer.position([KTP(r.topic, r.partition)])
                if now.offset > position:
                    position = now.offset
            if len(rows) >= ROWS_PER_BATCH:
                yield rows.flush()
            if position > before:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > limit:
                raise TimeoutError(
                    f"{r.topic}-{r.partition}: no progress for {limit:.0f} s at offset {position} "
                    f"while reading up to {r.end} (kafkaConsumer.pollTimeoutMs)")
    finally:
        consumer.close()
    batch = rows.flush()
    if batch is not None:
        yield batch


def _on_error(consumer, m, r: OffsetRange, position: int, fail_on_data_loss: bool) -> int:
    """Handle an error event ``m``; returns the position to go on from."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka import TopicPartition as KTP

    err = m.error()
    code = err.code()
    if code == KafkaError._PARTITION_EOF:
        # librdkafka reports EOF when its fetch position reaches the partition's end (the
        # LSO under read_committed, else the high watermark), once per end offset, and
        # carries that fetch position as the event's offset (rdkafka_fetcher.c,
        # rd_kafka_fetch_reply_handle_partition: ``end_offset == fetch_pos.offset``). Every
        # message below it was queued before the event, so nothing below it is still to
        # come. This is the only way past aborted batches at the end of a range: librdkafka
        # drops them without moving position(), e.g. when their ABORT marker lies past the
        # LSO because another transaction opened before the abort.
        eof = m.offset()
        return max(position, eof) if eof is not None and eof >= 0 else position
    if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
        low, high = consumer.get_watermark_offsets(KTP(r.topic, r.partition), timeout=_METADATA_TIMEOUT,
                                                   cached=False)
        if position >= high:
            # Past the end of the log: the topic was deleted and recreated, or its tail was
            # cut. The planned offsets will never exist; Spark's KafkaDataConsumer skips the
            # rest of the range when failOnDataLoss=false.
            _lost(f"{r.topic}-{r.partition}: offset {position} is past the end of the log, which now "
                  f"ends at {high} (the topic was recreated or its tail was lost); offsets "
                  f"{position}..{r.end - 1} cannot be read ({err.str()})", fail_on_data_loss)
            return r.end
        _lost(f"{r.topic}-{r.partition}: offsets {position}..{min(low, r.end) - 1} are gone from the "
              f"broker, which now starts at {low} ({err.str()})", fail_on_data_loss)
        if low >= r.end:
            return r.end
        # A fetcher stopped by the reset error refuses seek(); a new assignment restarts it.
        consumer.assign([KTP(r.topic, r.partition, max(low, position))])
        return max(low, position)
    if err.fatal():
        raise KafkaException(err)
    # Transient (a broker restarting, a timeout): librdkafka retries by itself, and the
    # caller's no-progress limit bounds the wait.
    log.warning("spark.kafka.consumer_error", topic=r.topic, partition=r.partition, position=position,
                error=err.str())
    return position


def _lost(message: str, fail: bool) -> None:
    if fail:
        raise DataLoss(message + " (set failOnDataLoss=false to read on)")
    log.warning("spark.kafka.data_loss", detail=message)
