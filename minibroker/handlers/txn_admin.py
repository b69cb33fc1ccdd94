"""DescribeTransactions, ListTransactions, DescribeProducers: the live state, for
kafka-transactions.sh-style tooling."""

from __future__ import annotations

import datetime
import re
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode
from minibroker_storage.manager import LogManager

from ..coordinator.txn.coordinator import TransactionCoordinator
from ..coordinator.txn.state import TxnState
from .api import Api, RequestContext
from .authz import OFF, Authz, Op, Res
from .common import ZERO, answers, partition_log, response_cls


def _ms_to_datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


class TxnAdminHandlers:
    def __init__(self, *, coordinator: TransactionCoordinator, logs: LogManager, authz: Authz = OFF) -> None:
        self.coordinator = coordinator
        self.authz = authz
        self.logs = logs

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.DescribeProducers, 0, 0, self.describe_producers),
            Api(ApiKey.DescribeTransactions, 0, 0, self.describe_transactions),
            Api(ApiKey.ListTransactions, 0, 2, self.list_transactions),
        ]

    @answers
    def describe_transactions(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        S = nested(R, "TransactionState")
        T = nested(R, "TopicData")
        coord = self.coordinator
        out = []
        for tid in req.transactional_ids:
            if not self.authz.allowed(ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, tid):
                # KafkaApis.handleDescribeTransactionsRequest: the response data's defaults
                out.append(build(S, error_code=ErrorCode.transactional_id_authorization_failed,
                                 transactional_id=tid, transaction_state="", transaction_timeout=ZERO,
                                 transaction_start_time=_ms_to_datetime(0), producer_id=0,
                                 producer_epoch=0, topics=()))
                continue
            meta = coord.describe(tid)
            if meta is None:
                out.append(build(S, error_code=ErrorCode.transactional_id_not_found,
                                 transactional_id=tid, transaction_state="",
                                 transaction_timeout=ZERO, transaction_start_time=_ms_to_datetime(-1),
                                 # Kafka answers an unknown id with producer id and epoch 0
                                 # (DescribeTransactionsResponseData's defaults), not -1.
                                 producer_id=0, producer_epoch=0, topics=()))
                continue
            by_topic: dict[str, list[int]] = {}
            for t, p in sorted(meta.partitions):
                by_topic.setdefault(t, []).append(p)
            # only the topics the caller may DESCRIBE are shown
            visible = self.authz.topics(ctx, Op.DESCRIBE, by_topic)
            by_topic = {t: ps for t, ps in by_topic.items() if t in visible}
            out.append(build(
                S, error_code=ErrorCode.none, transactional_id=tid,
                transaction_state=meta.state_name,
                transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms),
                transaction_start_time=_ms_to_datetime(meta.start_ms),
                producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                topics=tuple(build(T, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            ))
        return build(R, throttle_time=ZERO, transaction_states=tuple(out))

    @answers
    def list_transactions(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        S = nested(R, "TransactionState")
        coord = self.coordinator
        wanted_states = set(req.state_filters)
        unknown = tuple(s for s in req.state_filters if TxnState.by_name(s) is None)
        pids = set(req.producer_id_filters)
        min_duration = getattr(req, "duration_filter", -1)
        pattern = getattr(req, "transactional_id_pattern", None)
        try:
            regex = re.compile(pattern) if pattern else None
        except re.error:
            return build(R, throttle_time=ZERO, error_code=ErrorCode.invalid_regular_expression,
                         unknown_state_filters=(), transaction_states=())
        now = coord.clock.wall_ms()
        out = []
        for tid, meta in coord.live():
            if wanted_states and meta.state_name not in wanted_states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if min_duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < min_duration):
                continue
            if regex is not None and not regex.fullmatch(tid):
                continue
            # KafkaApis.handleListTransactionsRequest: the ids the caller may DESCRIBE
            if not self.authz.allowed(ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, tid):
                continue
            out.append(build(S, transactional_id=tid, producer_id=meta.producer_id,
                             transaction_state=meta.state_name))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none,
                     unknown_state_filters=unknown, transaction_states=tuple(out))

    @answers
    def describe_producers(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        T = nested(R, "TopicResponse")
        P = nested(R, "PartitionResponse")
        S = nested(R, "ProducerState")
        topics = []
        for t in req.topics:
            info = self.logs.topic(t.name)
            parts = []
            # KafkaApis.handleDescribeProducersRequest: READ on the topic, before its existence
            readable = self.authz.allowed(ctx, Op.READ, Res.TOPIC, t.name)
            for index in t.partition_indexes:
                if not readable:
                    parts.append(build(P, partition_index=index, error_message=None, active_producers=(),
                                       error_code=ErrorCode.topic_authorization_failed))
                    continue
                if info is None or not 0 <= index < info.partitions:
                    parts.append(build(P, partition_index=index,
                                       error_code=ErrorCode.unknown_topic_or_partition,
                                       error_message=None, active_producers=()))
                    continue
                plog = partition_log(self.logs, t.name, index)
                producers = tuple(
                    build(S, producer_id=e.producer_id, producer_epoch=e.epoch,
                          last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                          coordinator_epoch=e.coordinator_epoch,
                          current_txn_start_offset=e.current_txn_first_offset)
                    for _pid, e in sorted(plog.producer_state.items())
                )
                parts.append(build(P, partition_index=index, error_code=ErrorCode.none,
                                   error_message=None, active_producers=producers))
            topics.append(build(T, name=t.name, partitions=tuple(parts)))
        return build(R, throttle_time=ZERO, topics=tuple(topics))
