"""Fetch (long poll) and ListOffsets.

Fetch answers are encoded by hand (protocol.fetch) as header bytes plus
memoryviews of the segments, so no record byte is copied in Python.
Sessions (KIP-227) are declined by answering session id 0, which every
client handles by sending full fetches.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from minibroker_protocol import fetch as wire
from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.errors import OffsetOutOfRange
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager
from minibroker_storage.verify import CorruptBatch

from ..cluster import Cluster, connection_node
from .api import Api, RequestContext, Response
from .authz import OFF, Authz, Op
from .common import ZERO, answers, partition_log, response_cls

log = get_logger("minibroker.fetch")

READ_COMMITTED = 1

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6  # v11, KIP-1023 (tiered storage)
# The first ListOffsets version that may ask for each special timestamp (KIP-734, KIP-405,
# KIP-1005, KIP-1023); an older request gets UNSUPPORTED_VERSION for that partition, as Kafka
# 4.4 answers (tests/differential/test_current_versions.py).
_SINCE_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}


class FetchHandlers:
    def __init__(self, *, logs: LogManager,
                 wait_for_append: Callable[[list[tuple[str, int]], float], Awaitable[None]],
                 cluster: Cluster | None = None, authz: Authz = OFF,
                 quota_bytes: Callable[[RequestContext], int | None] | None = None,
                 rack_of: Callable[[int], str | None] | None = None) -> None:
        self.logs = logs
        # the most a consumer_byte_rate quota lets one answer carry (None: no quota)
        self.quota_bytes = quota_bytes
        # replica.selector.class is the rack-aware one: the broker.rack of each node (KIP-392)
        self.rack_of = rack_of
        self.authz = authz
        self.cluster = cluster  # virtual brokers: the leader serves a partition (an up follower a consumer)
        # the fetch waiters: returns when one of the partitions is appended to, or at the timeout
        self.wait_for_append = wait_for_append

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.Fetch, wire.MIN_VERSION, wire.MAX_VERSION, self.fetch),
            Api(ApiKey.ListOffsets, 1, 11, self.list_offsets),
        ]

    # -- Fetch -------------------------------------------------------------------
    def fetch(self, ctx: RequestContext, req: Any) -> Response | Awaitable[Response]:
        version = ctx.api_version
        # KafkaApis.handleFetchRequest: a consumer needs READ on each topic (asked once per
        # request, not again at each wake-up of a long poll)
        readable = None
        if self.authz.on:
            # by name, known or not (an unknown topic id is UNKNOWN_TOPIC_ID before anything)
            readable = self.authz.topics(ctx, Op.READ, (info.name for info, _ in self._resolved(req, version)
                                                        if info.name))
        # KafkaApis.handleFetchRequest: a consumer under a byte-rate quota fetches at most what
        # the quota's window allows (ClientQuotaManager.getMaxValueInQuotaWindow), else an
        # answer too large for the quota would be throttled and emptied again and again
        cap = self.quota_bytes(ctx) if self.quota_bytes is not None else None
        min_bytes = req.min_bytes if cap is None else min(req.min_bytes, cap)
        topics, total, any_error = self._read(req, version, connection_node(ctx), readable, cap)
        max_wait_ms = int(req.max_wait.total_seconds() * 1000)
        if total >= min_bytes or max_wait_ms <= 0 or any_error or not topics:
            return self._encode(ctx, topics)
        return self._long_poll(ctx, req, version, max_wait_ms, readable, cap, min_bytes)

    async def _long_poll(self, ctx: RequestContext, req: Any, version: int,
                         max_wait_ms: int, readable: set[str] | None, cap: int | None = None,
                         min_bytes: int = 1) -> Response:
        deadline = time.monotonic() + max_wait_ms / 1000
        watched = [(t.name, p.partition) for t, parts in self._resolved(req, version)
                   for p in parts]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await self.wait_for_append(watched, remaining)
            topics, total, any_error = self._read(req, version, connection_node(ctx), readable, cap)
            if total >= min_bytes or any_error:
                return self._encode(ctx, topics)
        topics, _total, _err = self._read(req, version, connection_node(ctx), readable, cap)
        return self._encode(ctx, topics)

    def _encode(self, ctx: RequestContext, topics: list) -> Response:
        chunks, size = wire.encode_fetch_response(ctx.correlation_id, ctx.api_version, topics)
        error = next((p.error_code for t in topics for p in t.partitions if p.error_code), 0)
        return Response.encoded(chunks, size, error)

    def _resolved(self, req, version):
        """(topic info or a stand-in with the requested name/id, partitions) pairs."""
        b = self.logs
        out = []
        for t in req.topics:
            if version >= 13:
                info = b.topic_by_id(t.topic_id)
            else:
                info = b.topic(t.topic)
            out.append((info if info is not None else _Missing(getattr(t, "topic", None),
                                                                 getattr(t, "topic_id", None)),
                        t.partitions))
        return out

    def _placement(self, node: int | None, topic: str, p: Any, version: int, consumer: bool,
                   rack: str) -> tuple[ErrorCode | None, int | None]:
        """On virtual brokers: why this node may not answer for the partition, or the replica
        the consumer should read from instead (KIP-392)."""
        cluster = self.cluster
        assert cluster is not None
        if not cluster.not_leader(node, topic, p.partition):
            if self.rack_of is not None and consumer and rack:
                return None, cluster.preferred_read_replica(topic, p.partition, rack, self.rack_of)
            return None, None
        if version < 11 or not consumer or not cluster.serves_consumer(node, topic, p.partition):
            return ErrorCode.not_leader_or_follower, None
        # a follower reading for a consumer checks the leader epoch the consumer knows
        # (Partition.fetchRecords -> getLocalLog's epoch check): a stale one learns of the new leader
        asked, epoch = getattr(p, "current_leader_epoch", -1), cluster.leader_epoch(topic, p.partition)
        if asked >= 0 and asked < epoch:
            return ErrorCode.fenced_leader_epoch, None
        if asked > epoch:
            return ErrorCode.unknown_leader_epoch, None
        return None, None

    def _read(self, req, version, node: int | None = None, readable: set[str] | None = None,
              cap: int | None = None):
        b = self.logs
        # a consumer's Fetch (not a follower's), and its client.rack (v11+)
        if version >= 15:
            state = getattr(req, "replica_state", None)
            consumer = getattr(state, "replica_id", -1) < 0
        else:
            consumer = getattr(req, "replica_id", -1) < 0
        rack = (getattr(req, "rack_id", "") or "") if version >= 11 else ""
        committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
        remaining = req.max_bytes if version >= 3 else 2**31 - 1
        if cap is not None:
            remaining = min(remaining, cap)
        min_one = True
        total = 0
        any_error = False
        topics = []
        # KafkaApis.handleFetchRequest answers the partitions it read first, then those it
        # refused before reading: unknown topic ids, then unknown topics/partitions, each in
        # request order; consecutive partitions of one topic share a topic entry.
        unknown_ids: list[tuple[wire.FetchTopic, wire.FetchPartition]] = []
        unknown_parts: list[tuple[wire.FetchTopic, wire.FetchPartition]] = []
        for info, parts in self._resolved(req, version):
            ft = wire.FetchTopic(info.name, info.topic_id)
            for p in parts:
                fp = wire.FetchPartition(p.partition)
                if readable is not None and info.name and info.name not in readable:
                    # in request order among the unknown partitions, as Kafka's erroneous list
                    fp.error_code = ErrorCode.topic_authorization_failed
                    fp.aborted, fp.records = [], b""
                    unknown_parts.append((ft, fp))
                    any_error = True
                    continue
                if isinstance(info, _Missing) or not 0 <= p.partition < info.partitions:
                    by_id = version >= 13 and isinstance(info, _Missing)
                    fp.error_code = (ErrorCode.unknown_topic_id if by_id
                                     else ErrorCode.unknown_topic_or_partition)
                    # FetchResponse.partitionResponse: an empty (not null) aborted list, no records.
                    fp.aborted, fp.records = [], b""
                    (unknown_ids if by_id else unknown_parts).append((ft, fp))
                    any_error = True
                    continue
                ft.partitions.append(fp)
                elsewhere = None
                if self.cluster is not None:
                    refused, elsewhere = self._placement(node, info.name, p, version, consumer, rack)
                    if refused is not None:
                        fp.error_code = refused
                        fp.aborted, fp.records = [], b""
                        any_error = True
                        continue
                plog = partition_log(b, info.name, p.partition)
                if elsewhere is not None:
                    # ReplicaManager.readFromLog: with a preferred read replica nothing is read, the
                    # offsets are told, and the answer goes at once
                    fp.high_watermark, fp.last_stable_offset = plog.high_watermark, plog.last_stable_offset
                    fp.log_start_offset = plog.log_start_offset
                    fp.preferred_read_replica, fp.records = elsewhere, b""
                    any_error = True
                    continue
                hw = plog.high_watermark
                lso = plog.last_stable_offset
                fp.high_watermark = hw
                fp.last_stable_offset = lso
                fp.log_start_offset = plog.log_start_offset
                limit = min(p.partition_max_bytes, remaining)
                try:
                    data, after = plog.read_to(p.fetch_offset, max(limit, 0),
                                               upper_bound=lso if committed else hw, min_one=min_one)
                except OffsetOutOfRange:
                    fp.error_code = ErrorCode.offset_out_of_range
                    _read_failed(fp)
                    any_error = True
                    continue
                except CorruptBatch as exc:
                    # Kafka answers a read that hits a corrupt record with CORRUPT_MESSAGE
                    # (ReplicaManager.readFromLocalLog -> Errors.forException). Clients hand it
                    # to the application (librdkafka's rdkafka_fetcher.c as a consumer error,
                    # the Java consumer as "Encountered corrupt message when fetching offset"),
                    # where KAFKA_STORAGE_ERROR would be retried silently forever.
                    log.warning("fetch.corrupt_batch", topic=info.name, partition=p.partition,
                                fetch_offset=p.fetch_offset, segment=exc.path,
                                position=exc.bad.position, first_offset=exc.bad.first_offset,
                                next_offset=exc.bad.next_offset, reason=exc.bad.reason)
                    fp.error_code = ErrorCode.corrupt_message
                    _read_failed(fp)
                    any_error = True
                    continue
                except OSError as exc:
                    log.error("fetch.read_failed", topic=info.name, partition=p.partition,
                              fetch_offset=p.fetch_offset, reason=str(exc))
                    fp.error_code = ErrorCode.kafka_storage_error
                    _read_failed(fp)
                    any_error = True
                    continue
                # Only READ_COMMITTED gets the list: the Java consumer drops aborted
                # batches solely through it; read_uncommitted sees everything. Only
                # the transactions overlapping the data returned, as Kafka lists them
                # (LocalLog.addAbortedTransactions): the rest of the log could hold
                # thousands, resent with every fetch.
                fp.aborted = plog.aborted_transactions(p.fetch_offset, after) if committed else None
                fp.records = data
                n = len(data)
                if n:
                    min_one = False
                    total += n
                    remaining -= n
            if ft.partitions:
                topics.append(ft)
        for ft, fp in unknown_ids + unknown_parts:
            if topics and (topics[-1].name, topics[-1].topic_id) == (ft.name, ft.topic_id):
                topics[-1].partitions.append(fp)
            else:
                topics.append(wire.FetchTopic(ft.name, ft.topic_id, [fp]))
        return topics, total, any_error

    # -- ListOffsets ---------------------------------------------------------------
    @answers
    def list_offsets(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        T = nested(R, "ListOffsetsTopicResponse")
        P = nested(R, "ListOffsetsPartitionResponse")
        b = self.logs
        committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
        seen: set[tuple[str, int]] = set()
        topics = []
        # KafkaApis.handleListOffsetRequestV1AndAbove: DESCRIBE on each topic; the refused
        # topics are answered after the others
        visible = self.authz.topics(ctx, Op.DESCRIBE, (t.name for t in req.topics))
        denied = []
        for t in req.topics:
            if t.name not in visible:
                denied.append(build(T, name=t.name, partitions=tuple(
                    build(P, partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1,
                          error_code=ErrorCode.topic_authorization_failed) for p in t.partitions)))
                continue
            info = b.topic(t.name)
            parts = []
            for p in t.partitions:
                key = (t.name, p.partition_index)
                if key in seen:
                    parts.append(build(P, partition_index=p.partition_index,
                                       error_code=ErrorCode.invalid_request, timestamp=-1, offset=-1,
                                       leader_epoch=-1))
                    continue
                seen.add(key)
                if info is None or not 0 <= p.partition_index < info.partitions:
                    parts.append(build(P, partition_index=p.partition_index,
                                       error_code=ErrorCode.unknown_topic_or_partition,
                                       timestamp=-1, offset=-1, leader_epoch=-1))
                    continue
                if self.cluster is not None and self.cluster.not_leader(
                        connection_node(ctx), t.name, p.partition_index):
                    parts.append(build(P, partition_index=p.partition_index,
                                       error_code=ErrorCode.not_leader_or_follower,
                                       timestamp=-1, offset=-1, leader_epoch=-1))
                    continue
                if ctx.api_version < _SINCE_VERSION.get(p.timestamp, 0):
                    parts.append(build(P, partition_index=p.partition_index,
                                       error_code=ErrorCode.unsupported_version,
                                       timestamp=-1, offset=-1, leader_epoch=-1))
                    continue
                ts, offset = self._lookup(t.name, p.partition_index, p.timestamp, committed,
                                          ctx.api_version)
                parts.append(build(P, partition_index=p.partition_index, error_code=ErrorCode.none,
                                   timestamp=ts, offset=offset, leader_epoch=0))
            topics.append(build(T, name=t.name, partitions=tuple(parts)))
        return build(R, throttle_time=ZERO, topics=tuple(topics + denied))

    def _lookup(self, topic: str, partition: int, target: int, committed: bool, version: int):
        b = self.logs
        plog = partition_log(b, topic, partition)
        if target in (EARLIEST, EARLIEST_LOCAL):
            return -1, plog.log_start_offset
        if target == LATEST:
            return -1, (plog.last_stable_offset if committed else plog.high_watermark)
        if target in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            return -1, -1  # no tiered storage: Kafka answers "no offset"
        if target == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
        else:
            found = plog.offset_for_timestamp(target)
        if found is None:
            return -1, -1
        offset, ts = found
        return ts, offset


class _Missing:
    __slots__ = ("name", "topic_id", "partitions")

    def __init__(self, name, topic_id) -> None:
        self.name = name or ""
        self.topic_id = topic_id
        self.partitions = 0


def _read_failed(fp) -> None:
    """A partition whose read failed answers no offsets (ReplicaManager.readFromLocalLog's
    LogReadResult for an exception: high watermark, LSO and log start all -1)."""
    fp.records = b""
    fp.high_watermark = fp.last_stable_offset = fp.log_start_offset = -1
