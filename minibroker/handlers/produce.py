"""Produce: validate each partition's batch header, append it, answer per partition.

Records are never decoded here (DESIGN.md, "The hot path"): the batch header
is checked, the base offset rewritten in the segment, and the bytes copied
once from the request frame into the mmap.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from minibroker_protocol import produce as wire
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.batch import (
    InvalidBatch,
    first_batch_transactional,
    read_header,
    validate_produce_records,
)
from minibroker_protocol.errors import ErrorCode, for_version
from minibroker_protocol.record_checks import RecordErrors, RecordRules, check_records, stamp_log_append_time
from minibroker_protocol.topics import is_internal
from minibroker_storage.catalog import TopicInfo
from minibroker_storage.errors import ProducerStateError, StorageError
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager

from ..cluster import Cluster, connection_node
from ..coordinator.txn.timeline import NO_TIMELINE, Timeline
from ..core.crash_points import CrashPoints
from .api import NO_RESPONSE, Api, Disconnect, RequestContext, Response
from .authz import OFF, Authz, Op, Res
from .common import partition_log

log = get_logger("minibroker.produce")

# What a partition's append answers: (index, error, base offset, log start offset, message),
# then, when they were computed, the records the validator refused and the LogAppendTime given.
PartitionResult = tuple[int, ErrorCode, int, int, str | None] | tuple[
    int, ErrorCode, int, int, str | None, RecordErrors | None, int]
NO_TIMESTAMP = -1


class ProduceHandlers:
    def __init__(self, *, logs: LogManager,
                 verify_produce: Callable[[int, int, str, int, bool], ErrorCode | None],
                 notify_append: Callable[[str, int], None],
                 max_message_bytes: Callable[[TopicInfo], int],
                 record_rules: Callable[[TopicInfo], RecordRules] = lambda info: RecordRules(),
                 now_ms: Callable[[], int] | None = None,
                 min_insync_replicas: Callable[[TopicInfo], int] = lambda info: 1,
                 crash: CrashPoints | None = None, cluster: Cluster | None = None,
                 timeline: Timeline = NO_TIMELINE, authz: Authz = OFF) -> None:
        self.logs = logs
        self.authz = authz
        # an idempotent producer's refused and duplicate batches, for `minibroker txn explain`
        self.timeline = timeline
        self.cluster = cluster  # virtual brokers: only the partition's leader appends
        # crash rules at produce.after_append (the batch is in the log, the answer not sent)
        self.crash = crash if crash is not None else CrashPoints()
        # the transaction coordinator's check that a transactional batch is in its transaction
        self.verify_produce = verify_produce
        # wakes the fetch waiters of the partition
        self.notify_append = notify_append
        self.max_message_bytes = max_message_bytes
        # the topic's message.timestamp.* and cleanup.policy, as LogValidator checks records
        self.record_rules = record_rules
        # the broker's clock (the control plane may drive it): LogAppendTime and CreateTime bounds
        self.now_ms = now_ms if now_ms is not None else _wall_ms
        self.min_insync_replicas = min_insync_replicas

    def apis(self) -> list[Api]:
        # v12 is v11 whose transactional batches join their transaction implicitly
        # (transactions v2, KIP-890); v13 names topics by id (KIP-516).
        return [Api(ApiKey.Produce, wire.MIN_VERSION, wire.MAX_VERSION, self.produce,
                    decoder=wire.decode_produce)]

    def produce(self, ctx: RequestContext, req: wire.ProduceRequest) -> Response:
        acks = req.acks
        results: list[tuple[wire.ProduceTopic, list[PartitionResult]]] = []
        any_error = False
        cache: dict[str, bool] = {}

        def unwritable(name: str | None) -> bool:
            # AuthHelper.filterByAuthorized: WRITE on each topic, asked once per request
            if name is None or not self.authz.on:
                return False
            if name not in cache:
                cache[name] = self.authz.allowed(ctx, Op.WRITE, Res.TOPIC, name)
            return not cache[name]

        authz_on = self.authz.on  # a property: read once per request, not per partition
        refused = self._refused(ctx, req) if authz_on else None
        if refused is not None:
            for t in req.topics:
                results.append((t, [(p.index, refused, -1, -1, None) for p in t.partitions]))
            any_error = True
        elif acks not in (0, 1, -1):
            for t in req.topics:
                results.append((t, [
                    (p.index, ErrorCode.topic_authorization_failed, -1, -1, None) if unwritable(t.name)
                    else (p.index, ErrorCode.invalid_required_acks, -1, -1, "Invalid required acks")
                    for p in t.partitions]))
            any_error = True
        else:
            for t in req.topics:
                parts = []
                name: str | None = t.name
                if t.topic_id is not None:
                    info = self.logs.topic_by_id(t.topic_id)
                    name = info.name if info is not None else None
                for p in t.partitions:
                    if authz_on and unwritable(name):
                        # KafkaApis.handleProduceRequest: before the topic's existence is looked at
                        res: PartitionResult = (p.index, ErrorCode.topic_authorization_failed, -1, -1, None)
                    elif name is None:
                        res = (p.index, ErrorCode.unknown_topic_id, -1, -1,
                               "This server does not host this topic ID.")
                    elif self.cluster is not None and self.cluster.not_leader(
                            connection_node(ctx), name, p.index):
                        res = (p.index, ErrorCode.not_leader_or_follower, -1, -1,
                               "This is not the correct leader for this partition.")
                    else:
                        res = self._append(name, p, implicit_add=ctx.api_version >= 12, acks=acks)
                    if res[1] != ErrorCode.none:
                        any_error = True
                    parts.append(res)
                results.append((t, parts))
        if acks == 0:
            if any_error:
                # Kafka closes the connection so an acks=0 producer notices (KafkaApis.handleProduceRequest).
                raise Disconnect("produce_error_acks0", "a partition failed in an acks=0 produce")
            return NO_RESPONSE
        version = ctx.api_version
        answers = []
        first_error = 0
        for t, parts in results:
            entries = []
            for res in parts:
                index, error, base_offset, log_start, message = res[:5]
                rejected, append_time = (res[5], res[6]) if len(res) > 5 else (None, NO_TIMESTAMP)
                if error:
                    # The code this request version understands (TRANSACTION_ABORTABLE since v11).
                    error = for_version(error, ApiKey.Produce, version)
                record_errors: tuple[tuple[int, str | None], ...] = ()
                if rejected is not None:
                    record_errors = rejected.records
                elif error == ErrorCode.invalid_record:
                    record_errors = ((0, message),)
                if error and not first_error:
                    first_error = int(error)
                entries.append((index, int(error), base_offset, append_time, log_start, record_errors,
                                message if error != ErrorCode.none else None))
            answers.append((t.name, t.topic_id, entries))
        data = wire.encode_produce_response(ctx.correlation_id, version, answers)
        # the request log and /metrics read the first partition error from error_code
        return Response.encoded((data,), len(data), first_error)

    def _isr_short(self, topic: str, partition: int, info: TopicInfo) -> str | None:
        """Partition.appendRecordsToLeader: an acks=all write needs min.insync.replicas in sync,
        capped at the replication factor (effectiveMinIsr), or why it is short."""
        if self.cluster is None:
            return None  # one broker, one replica: the cap makes any min.insync.replicas 1
        replicas = self.cluster.replicas(topic, partition)
        min_isr = min(self.min_insync_replicas(info), len(replicas))
        isr = self.cluster.isr(topic, partition)
        if len(isr) >= min_isr:
            return None
        return (f"The size of the current ISR {_isr_text(isr)} is insufficient to satisfy the min.isr "
                f"requirement of {min_isr} for partition {topic}-{partition}")

    def _refused(self, ctx: RequestContext, req: wire.ProduceRequest) -> ErrorCode | None:
        """KafkaApis.handleProduceRequest: a request with transactional batches needs its
        transactional id and WRITE on it, or every partition answers
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
        if not any(first_batch_transactional(p.records) for t in req.topics for p in t.partitions):
            return None
        tid = req.transactional_id
        if tid is not None and self.authz.allowed(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, tid):
            return None
        return ErrorCode.transactional_id_authorization_failed

    def _append(self, topic: str, p: wire.ProducePartition, implicit_add: bool, acks: int = -1
                ) -> PartitionResult:
        info = self.logs.topic(topic)
        if info is None or not 0 <= p.index < info.partitions:
            return (p.index, ErrorCode.unknown_topic_or_partition, -1, -1,
                    "This server does not host this topic-partition.")
        if is_internal(topic):
            return (p.index, ErrorCode.invalid_topic_exception, -1, -1,
                    f"Cannot append to internal topic {topic}")
        plog = partition_log(self.logs, topic, p.index)
        records = p.records
        if records is None:
            return (p.index, ErrorCode.corrupt_message, -1, plog.log_start_offset,
                    "Produce request carries null records")
        max_bytes = self.max_message_bytes(info)
        if len(records) > max_bytes:
            log.info("produce.rejected", topic=topic, partition=p.index, reason="message_too_large",
                     size=len(records), max_message_bytes=max_bytes)
            return (p.index, ErrorCode.message_too_large, -1, plog.log_start_offset,
                    f"The batch size {len(records)} is larger than max.message.bytes {max_bytes}")
        try:
            header = validate_produce_records(records)
        except InvalidBatch as e:
            log.warning("produce.rejected", topic=topic, partition=p.index, reason=e.error_code.name,
                        detail=e.message, size=len(records))
            return (p.index, e.error_code, -1, plog.log_start_offset, e.message)
        if header.is_control:
            # LogValidator: clients are not allowed to write control records.
            log.warning("produce.rejected", topic=topic, partition=p.index,
                        reason="control batch from a client", producer_id=header.producer_id)
            return (p.index, ErrorCode.invalid_record, -1, plog.log_start_offset,
                    "Clients are not allowed to write control records")
        if header.is_transactional and header.producer_id >= 0:
            # The coordinator is local, so the partition-leader check of
            # KIP-890 part 1 is exact: the partition must be in the producer's
            # open transaction. Kafka verifies only batches that carry a producer id
            # (ReplicaManager.appendRecords' verification guard); one without is stored.
            # From v12 the partition joins the transaction instead (KafkaApis: the
            # transactionSupportedOperation of Produce > v11 is addPartition).
            error = self.verify_produce(header.producer_id, header.producer_epoch, topic, p.index,
                                        implicit_add)
            if error is not None:
                log.warning("produce.rejected", topic=topic, partition=p.index,
                            reason="transactional batch outside its transaction", error=error.name,
                            producer_id=header.producer_id, epoch=header.producer_epoch)
                # Refused before the log is read, as Kafka's verification refuses it: no
                # log start offset in the answer (-1), unlike producer-state errors.
                return (p.index, error, -1, -1,
                        "transactional batch for a partition not in the producer's transaction")
        # _isr_short answers None at once without virtual brokers: not called then
        short = self._isr_short(topic, p.index, info) if acks == -1 and self.cluster is not None else None
        if short is not None:
            log.warning("produce.rejected", topic=topic, partition=p.index, reason="not_enough_replicas",
                        detail=short)
            # ReplicaManager answers it without a message (not a custom one), the log start offset told
            return (p.index, ErrorCode.not_enough_replicas, -1, plog.log_start_offset, None)
        rules = self.record_rules(info)
        now = self.now_ms()
        # a clock held back by the control plane does not make real-time records future ones
        latest = max(now, _wall_ms())
        if rules.needs_records(header, now, latest):
            try:
                refused = check_records(records, header, rules, now, f"{topic}-{p.index}", latest)
            except InvalidBatch as e:
                log.warning("produce.rejected", topic=topic, partition=p.index, reason=e.error_code.name,
                            detail=e.message, size=len(records))
                return (p.index, e.error_code, -1, plog.log_start_offset, e.message)
            if refused is not None:
                log.info("produce.rejected", topic=topic, partition=p.index, reason=refused.error_code.name,
                         records=len(refused.records), first=refused.records[0][1])
                return (p.index, refused.error_code, -1, plog.log_start_offset, refused.message, refused,
                        NO_TIMESTAMP)
        append_time = NO_TIMESTAMP
        data: bytes | bytearray | memoryview = records
        if rules.log_append_time:
            # LogValidator: the broker's time in maxTimestamp and the attribute bit, whatever the
            # producer put there; a compressed payload is left as it is
            append_time = now
            data = stamp_log_append_time(records, now)
            header = read_header(data, 0)
        try:
            appended = plog.append(data, header)
        except ProducerStateError as e:
            log.warning("produce.rejected", topic=topic, **e.log_fields())
            self.timeline.record_producer(header.producer_id, "refused", api="Produce", topic=topic,
                                          error=e.error_code.name.upper(), message=str(e), partition=p.index,
                                          epoch=header.producer_epoch, first_sequence=header.base_sequence)
            return (p.index, e.error_code, -1, plog.log_start_offset, str(e))
        except StorageError as e:
            log.error("produce.append_failed", topic=topic, partition=p.index,
                      error=e.error_code.name, detail=str(e))
            return (p.index, e.error_code, -1, plog.log_start_offset, str(e))
        if not appended.duplicate:
            self.notify_append(topic, p.index)
            if self.crash.armed:  # CrashPoints.hit's own first check, without the call per batch
                self.crash.hit("produce.after_append", None, topic, p.index)
        else:
            self.timeline.record_producer(header.producer_id, "duplicate", topic=topic, partition=p.index,
                                          epoch=header.producer_epoch, first_sequence=header.base_sequence,
                                          offset=appended.base_offset)
        return (p.index, ErrorCode.none, appended.base_offset, plog.log_start_offset, None, None, append_time)


def _isr_text(isr: list[int]) -> str:
    return "Set(" + ", ".join(map(str, isr)) + ")"  # a Scala Set, as Kafka's message prints it


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
