"""InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers.

PRODUCER_FENCED (90) exists only for request versions new enough to know it;
minibroker_protocol.errors.for_version gives older ones INVALID_PRODUCER_EPOCH (47).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker_protocol.api_keys import ApiKey
from minibroker_protocol.build import build, nested
from minibroker_protocol.errors import ErrorCode, for_version
from minibroker_protocol.topics import GROUP_METADATA_TOPIC, is_internal
from minibroker_protocol.txn_wire import (
    decode_add_partitions,
    decode_end_txn,
    encode_add_partitions_response,
    encode_end_txn_response,
)
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager
from minibroker_storage.producer_ids import ProducerIdAllocator

from ..coordinator.txn.coordinator import TransactionCoordinator, TxnError
from ..coordinator.txn.machine import TV_EPOCH_BUMP
from ..coordinator.txn.timeline import Timeline, requester_of
from .api import Api, RequestContext, Response
from .authz import OFF, Authz, Op, Res
from .common import ZERO, answers, response_cls

log = get_logger("minibroker.txn")


def _code(ctx: RequestContext, code: ErrorCode) -> ErrorCode:
    return for_version(code, ctx.api_key, ctx.api_version)


class TxnHandlers:
    def __init__(self, *, coordinator: TransactionCoordinator, logs: LogManager,
                 producer_ids: ProducerIdAllocator,
                 offsets_partition_for: Callable[[str], int], authz: Authz = OFF) -> None:
        self.coordinator = coordinator
        self.authz = authz
        self.timeline: Timeline = coordinator.timeline
        self.logs = logs
        # idempotent (non-transactional) producers get their ids straight from the allocator
        self.producer_ids = producer_ids
        # the __consumer_offsets partition of a group, which AddOffsetsToTxn adds
        self.offsets_partition_for = offsets_partition_for

    def apis(self) -> list[Api]:
        return [
            Api(ApiKey.InitProducerId, 0, 5, self.init_producer_id),
            # one of each per transaction: decoded by hand (protocol/txn_wire.py)
            Api(ApiKey.AddPartitionsToTxn, 0, 5, self.add_partitions, decoder=decode_add_partitions),
            Api(ApiKey.AddOffsetsToTxn, 0, 4, self.add_offsets),
            Api(ApiKey.EndTxn, 0, 5, self.end_txn, decoder=decode_end_txn),
            Api(ApiKey.WriteTxnMarkers, 1, 2, self.write_txn_markers),
        ]

    # -- InitProducerId --------------------------------------------------------------
    @answers
    def init_producer_id(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        # KafkaApis.handleInitProducerIdRequest: authorization comes first. A transactional id
        # needs WRITE on it; an idempotent producer IDEMPOTENT_WRITE on the cluster or (Kafka 3+)
        # WRITE on some topic (Authorizer.authorizeByResourceType).
        if req.transactional_id is not None:
            if not self.authz.allowed(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
                return build(R, throttle_time=ZERO, producer_id=-1, producer_epoch=-1,
                             error_code=ErrorCode.transactional_id_authorization_failed)
        elif (not self.authz.cluster(ctx, Op.IDEMPOTENT_WRITE, log_if_denied=False)
              and not self.authz.by_resource_type(ctx, Op.WRITE, Res.TOPIC)):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         producer_id=-1, producer_epoch=-1)
        pid_given, epoch_given = getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1)
        if (pid_given == -1) != (epoch_given == -1):
            # KafkaApis.handleInitProducerIdRequest: a producer id without an epoch (or
            # the reverse) is INVALID_REQUEST, before anything else is looked at.
            log.info("init_producer_id.refused", transactional_id=req.transactional_id,
                     error=ErrorCode.invalid_request.name, producer_id=pid_given,
                     epoch=epoch_given, detail="only one of producer id and epoch is set",
                     client_id=ctx.client_id)
            return build(R, throttle_time=ZERO, error_code=ErrorCode.invalid_request,
                         producer_id=-1, producer_epoch=-1)
        if req.transactional_id is None:
            # Kafka hands an idempotent producer a fresh id with epoch 0 whatever
            # the request carries (KafkaApis: "always blindly accept the request").
            pid = self.producer_ids.next_id()
            self.timeline.record_producer(pid, "init", producer_id=pid, epoch=0,
                                          reason="idempotent producer: a new producer id",
                                          **requester_of(ctx).fields())
            log.info("init_producer_id.assigned", producer_id=pid, producer_epoch=0,
                     previous_producer_id=getattr(req, "producer_id", -1),
                     previous_epoch=getattr(req, "producer_epoch", -1), client_id=ctx.client_id)
            return build(R, throttle_time=ZERO, error_code=ErrorCode.none, producer_id=pid,
                         producer_epoch=0)
        timeout_ms = int(req.transaction_timeout.total_seconds() * 1000)
        try:
            pid, epoch = self.coordinator.init_producer_id(
                req.transactional_id, timeout_ms,
                getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1), requester_of(ctx))
        except TxnError as e:
            self._refused(ctx, req.transactional_id, e, getattr(req, "producer_id", -1),
                          getattr(req, "producer_epoch", -1))
            log.info("init_producer_id.refused", transactional_id=req.transactional_id,
                     error=e.code.name, detail=str(e), client_id=ctx.client_id)
            return build(R, throttle_time=ZERO, error_code=_code(ctx, e.code), producer_id=-1,
                         producer_epoch=-1)
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, producer_id=pid,
                     producer_epoch=epoch)

    # -- AddPartitionsToTxn ----------------------------------------------------------------
    def add_partitions(self, ctx: RequestContext, req: Any) -> Response:
        if ctx.api_version >= 4:
            return Response.of(ctx.correlation_id, self._add_partitions_batched(ctx, req))
        R = response_cls(ctx)
        T = nested(R, "AddPartitionsToTxnTopicResult")
        P = nested(R, "AddPartitionsToTxnPartitionResult")
        wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        tid = req.v3_and_below_transactional_id
        if not self.authz.allowed(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, tid):
            # AddPartitionsToTxnRequest.errorResponseForTransaction: every partition the same
            return self._partition_errors(ctx, R, T, P, {
                tp: ErrorCode.transactional_id_authorization_failed for tp in wanted})
        writable = self.authz.topics(ctx, Op.WRITE, (t for t, _ in wanted if not is_internal(t)))
        # KafkaApis.handleAddPartitionsToTxnRequest (v0-v3, from clients): internal
        # topics are never authorized for a client's transaction (TOPIC_AUTHORIZATION_FAILED,
        # whether they exist or not), then unknown partitions; either refuses the whole
        # request, the rest answering OPERATION_NOT_ATTEMPTED. A marker of a client's
        # transaction must never reach __transaction_state or __consumer_offsets this way.
        refused: dict[tuple[str, int], ErrorCode] = {}
        for t, p in wanted:
            if is_internal(t) or t not in writable:
                refused[(t, p)] = ErrorCode.topic_authorization_failed
            elif (info := self.logs.topic(t)) is None or not 0 <= p < info.partitions:
                refused[(t, p)] = ErrorCode.unknown_topic_or_partition
        if refused:
            log.info("add_partitions.refused", transactional_id=req.v3_and_below_transactional_id,
                     producer_id=req.v3_and_below_producer_id,
                     refused={f"{t}-{p}": e.name for (t, p), e in refused.items()},
                     client_id=ctx.client_id)
            errors = {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
        else:
            try:
                self.coordinator.add_partitions(req.v3_and_below_transactional_id,
                                                req.v3_and_below_producer_id,
                                                req.v3_and_below_producer_epoch, wanted, requester_of(ctx))
                code = ErrorCode.none
            except TxnError as e:
                self._refused(ctx, req.v3_and_below_transactional_id, e, req.v3_and_below_producer_id,
                              req.v3_and_below_producer_epoch)
                code = _code(ctx, e.code)
            errors = {tp: code for tp in wanted}
        return self._partition_errors(ctx, R, T, P, errors)

    def _add_partitions_batched(self, ctx: RequestContext, req: Any) -> Any:
        """v4-5: what a partition leader sends the coordinator (KIP-890): several transactions,
        each verified (verify_only: is the partition in the open transaction?) or added, for a
        transactions-v2 producer. Brokers only: CLUSTER_ACTION on the cluster. v5 only adds that
        TRANSACTION_ABORTABLE may be answered, which v4 answers too (checked against Kafka 4.4)."""
        R = response_cls(ctx)
        Result = nested(R, "AddPartitionsToTxnResult")
        T = nested(R, "AddPartitionsToTxnTopicResult")
        P = nested(R, "AddPartitionsToTxnPartitionResult")
        if not self.authz.cluster(ctx, Op.CLUSTER_ACTION):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.cluster_authorization_failed,
                         results_by_transaction=())
        results = []
        for txn in req.transactions:
            wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
            unknown = {tp for tp in wanted
                       if (info := self.logs.topic(tp[0])) is None or not 0 <= tp[1] < info.partitions}
            errors: dict[tuple[str, int], ErrorCode]
            if unknown:  # as below v4: the whole transaction's partitions are left alone
                errors = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown
                          else ErrorCode.operation_not_attempted for tp in wanted}
            elif txn.verify_only:
                errors = self.coordinator.verify_partitions(txn.transactional_id, txn.producer_id,
                                                            txn.producer_epoch, wanted)
            else:
                try:
                    self.coordinator.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                    wanted, requester_of(ctx), client_tv=TV_EPOCH_BUMP)
                    code = ErrorCode.none
                except TxnError as e:
                    self._refused(ctx, txn.transactional_id, e, txn.producer_id, txn.producer_epoch)
                    code = e.code
                errors = dict.fromkeys(wanted, code)
            by_topic: dict[str, list] = {}
            for (t, p), code in errors.items():
                by_topic.setdefault(t, []).append(build(P, partition_index=p, partition_error_code=code))
            results.append(build(Result, transactional_id=txn.transactional_id, topic_results=tuple(
                build(T, name=t, results_by_partition=tuple(ps)) for t, ps in by_topic.items())))
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, results_by_transaction=tuple(results))

    @staticmethod
    def _partition_errors(ctx: RequestContext, R: Any, T: Any, P: Any,
                          errors: dict[tuple[str, int], ErrorCode]) -> Response:
        by_topic: dict[str, list] = {}
        for (t, p), code in errors.items():
            by_topic.setdefault(t, []).append((p, code))
        # The entity is kept for the request log and for a quota's throttle, which re-encodes
        # it; the bytes are written by hand (protocol/txn_wire.py), kio's writer being most of
        # this answer's cost on a transaction's path.
        entity = build(R, throttle_time=ZERO, results_by_topic_v3_and_below=tuple(
            build(T, name=t, results_by_partition=tuple(
                build(P, partition_index=p, partition_error_code=code) for p, code in parts))
            for t, parts in by_topic.items()))
        data = encode_add_partitions_response(ctx.correlation_id, ctx.api_version, 0, by_topic.items())
        return Response((data,), len(data), entity)

    # -- AddOffsetsToTxn -----------------------------------------------------------------
    @answers
    def add_offsets(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        # KafkaApis.handleAddOffsetsToTxnRequest: WRITE on the id, then READ on the group
        if not self.authz.allowed(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.transactional_id_authorization_failed)
        if not self.authz.allowed(ctx, Op.READ, Res.GROUP, req.group_id):
            return build(R, throttle_time=ZERO, error_code=ErrorCode.group_authorization_failed)
        partition = self.offsets_partition_for(req.group_id)
        try:
            self.coordinator.add_partitions(req.transactional_id, req.producer_id,
                                            req.producer_epoch, [(GROUP_METADATA_TOPIC, partition)],
                                            requester_of(ctx), group=req.group_id)
            code = ErrorCode.none
        except TxnError as e:
            self._refused(ctx, req.transactional_id, e, req.producer_id, req.producer_epoch)
            code = _code(ctx, e.code)
        return build(R, throttle_time=ZERO, error_code=code)

    # -- EndTxn -----------------------------------------------------------------------------
    @staticmethod
    def _end_txn_answer(ctx: RequestContext, code: ErrorCode, pid: int, epoch: int) -> Response:
        # As _partition_errors: the entity for the log and quotas, the bytes by hand.
        entity = build(response_cls(ctx), throttle_time=ZERO, error_code=code, producer_id=pid,
                       producer_epoch=epoch)
        data = encode_end_txn_response(ctx.correlation_id, ctx.api_version, 0, code, pid, epoch)
        return Response((data,), len(data), entity)

    def end_txn(self, ctx: RequestContext, req: Any) -> Response:
        # KafkaApis.handleEndTxnRequest: v5 is a transactions-v2 client, whose epoch moves on
        # at every EndTxn; the answer carries the producer id and epoch to go on with.
        client_tv = 2 if ctx.api_version >= 5 else 0
        if not self.authz.allowed(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
            # EndTxnResponseData's defaults: producer id -1, epoch -1
            return self._end_txn_answer(ctx, ErrorCode.transactional_id_authorization_failed, -1, -1)
        try:
            pid, epoch = self.coordinator.end_txn(req.transactional_id, req.producer_id,
                                                  req.producer_epoch, req.committed, client_tv,
                                                  requester_of(ctx))
            code = ErrorCode.none
        except TxnError as e:
            self._refused(ctx, req.transactional_id, e, req.producer_id, req.producer_epoch,
                          commit=req.committed)
            log.info("end_txn.refused", transactional_id=req.transactional_id,
                     producer_id=req.producer_id, epoch=req.producer_epoch,
                     commit=req.committed, error=e.code.name, detail=str(e))
            code = _code(ctx, e.code)
            pid, epoch = -1, -1
        return self._end_txn_answer(ctx, code, pid, epoch)

    def _refused(self, ctx: RequestContext, tid: str | None, e: TxnError, pid: int, epoch: int,
                 **fields: Any) -> None:
        """A refusal goes into the id's timeline with the error and who asked (a zombie's
        request after a fence is what `txn explain` ends its story with)."""
        if not tid:
            return
        meta = self.coordinator.describe(tid)
        self.timeline.record(tid, "refused", api=ApiKey(ctx.api_key).name, api_version=ctx.api_version,
                             error=e.code.name.upper(), message=str(e), producer_id=pid, epoch=epoch,
                             current_producer_id=meta.producer_id if meta is not None else None,
                             current_epoch=meta.producer_epoch if meta is not None else None,
                             **fields, **requester_of(ctx).fields())

    # -- WriteTxnMarkers ---------------------------------------------------------------------
    @answers
    def write_txn_markers(self, ctx: RequestContext, req: Any) -> Any:
        R = response_cls(ctx)
        M = nested(R, "WritableTxnMarkerResult")
        T = nested(R, "WritableTxnMarkerTopicResult")
        P = nested(R, "WritableTxnMarkerPartitionResult")
        results = []
        # KafkaApis.handleWriteTxnMarkersRequest: brokers only (ALTER or CLUSTER_ACTION on the
        # cluster); otherwise every partition answers CLUSTER_AUTHORIZATION_FAILED.
        allowed = (self.authz.cluster(ctx, Op.ALTER, log_if_denied=False)
                   or self.authz.cluster(ctx, Op.CLUSTER_ACTION))
        for m in req.markers:
            partitions = [(t.name, p) for t in m.topics for p in t.partition_indexes]
            if not allowed:
                errors = {tp: ErrorCode.cluster_authorization_failed for tp in partitions}
            else:
                # v2 names the marker's transaction version (KIP-1228): from 2 the partition
                # wants the marker's epoch above the producer's
                errors = self.coordinator.write_markers(m.producer_id, m.producer_epoch,
                                                        m.transaction_result, m.coordinator_epoch,
                                                        partitions, getattr(m, "transaction_version", 0))
            by_topic: dict[str, list] = {}
            for (t, p), code in errors.items():
                by_topic.setdefault(t, []).append(build(P, partition_index=p, error_code=code))
            results.append(build(M, producer_id=m.producer_id, topics=tuple(
                build(T, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
        return build(R, markers=tuple(results))
