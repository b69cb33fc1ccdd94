"""The five places where an audit found minibroker answering differently from Apache Kafka's
transaction coordinator (issue 14, item 4); each test names the Kafka source it follows."""

from __future__ import annotations

import asyncio

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker_protocol import txn_log as tl
from minibroker_protocol.errors import ErrorCode

from . import requests as rq
from .conftest import RawClient
from .test_idempotence import part
from .test_transactions import add_codes, add_partitions, control_types, end_txn, init, prod_code, txn_batch

# -- 1. a new instance's InitProducerId forgets the previous epoch ------------------------------
# TransactionMetadata.prepareIncrementProducerEpoch: without an expected epoch the bump sets
# lastProducerEpoch = -1; KafkaApis.handleInitProducerIdRequest: only one of id/epoch is INVALID_REQUEST.

async def test_fenced_instance_cannot_pass_for_a_retry(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["dv-fence"]))
    a = await c.call(init("dv-fence"))  # instance A
    b = await c.call(init("dv-fence"))  # instance B fences A
    assert (b.producer_id, b.producer_epoch) == (a.producer_id, a.producer_epoch + 1)
    # A, after an abortable error, asks for a bump of the epoch it holds (Java, librdkafka)
    zombie = await c.call(init("dv-fence", pid=a.producer_id, epoch=a.producer_epoch))
    assert (zombie.error_code, zombie.producer_id, zombie.producer_epoch) == (
        ErrorCode.producer_fenced, -1, -1)
    meta = broker.broker.txn_coordinator.txns["dv-fence"]
    assert (meta.producer_epoch, meta.state) == (b.producer_epoch, tl.EMPTY)  # B untouched
    # B's transaction goes through; A's epoch is good for nothing
    assert set(add_codes(await c.call(add_partitions("dv-fence", b.producer_id, b.producer_epoch,
                                                     "dv-fence", [0]))).values()) == {0}
    assert (await c.call(end_txn("dv-fence", a.producer_id, a.producer_epoch, True))).error_code == \
        ErrorCode.producer_fenced
    assert (await c.call(end_txn("dv-fence", b.producer_id, b.producer_epoch, True))).error_code == 0


async def test_zombie_during_an_open_transaction_is_fenced_as_kafka_does(broker):
    # Kafka's prepareInitProducerIdTransit accepts the request's producer id, fences the open
    # transaction (PrepareEpochFence, lastProducerEpoch = -1) and the retry is then refused:
    # the zombie never gets an epoch. (Kafka answers CONCURRENT_TRANSACTIONS first and
    # PRODUCER_FENCED on the retry; minibroker finishes the abort at once and fences.)
    c = await broker.connect()
    await c.call(rq.metadata(["dv-fence2"]))
    a = await c.call(init("dv-fence2"))
    b = await c.call(init("dv-fence2"))
    await c.call(add_partitions("dv-fence2", b.producer_id, b.producer_epoch, "dv-fence2", [0]))
    zombie = await c.call(init("dv-fence2", pid=a.producer_id, epoch=a.producer_epoch))
    assert (zombie.error_code, zombie.producer_epoch) == (ErrorCode.producer_fenced, -1)
    meta = broker.broker.txn_coordinator.txns["dv-fence2"]
    assert (meta.state, meta.producer_epoch) == (tl.COMPLETE_ABORT, b.producer_epoch + 1)


async def test_a_retried_bump_still_gets_the_same_answer(broker):
    c = await broker.connect()
    a = await c.call(init("dv-retry"))
    bumped = await c.call(init("dv-retry", pid=a.producer_id, epoch=a.producer_epoch))
    again = await c.call(init("dv-retry", pid=a.producer_id, epoch=a.producer_epoch))  # answer lost
    assert bumped.error_code == again.error_code == 0
    assert (again.producer_id, again.producer_epoch) == (bumped.producer_id, bumped.producer_epoch)
    assert bumped.producer_epoch == a.producer_epoch + 1


async def test_init_producer_id_with_only_one_of_id_and_epoch_is_invalid(broker):
    c = await broker.connect()
    a = await c.call(init("dv-half"))
    for tid in ("dv-half", None):
        for pid, epoch in ((a.producer_id, -1), (-1, a.producer_epoch + 3)):
            r = await c.call(init(tid, pid=pid, epoch=epoch))
            assert (r.error_code, r.producer_id, r.producer_epoch) == (ErrorCode.invalid_request, -1, -1)
    meta = broker.broker.txn_coordinator.txns["dv-half"]
    assert meta.producer_epoch == a.producer_epoch  # nothing was bumped


# -- 2. a timeout at epoch 32766 still fences --------------------------------------------------
# TransactionMetadata.prepareFenceProducerEpoch bumps to Short.MaxValue; only 32767 cannot be bumped.

async def test_timeout_at_the_last_client_epoch_still_fences(broker):
    broker.broker.features.set_level("transaction.version", 1)
    c = await broker.connect()
    await c.call(rq.metadata(["dv-exhaust"]))
    r = await c.call(init("dv-exhaust"))
    coord = broker.broker.txn_coordinator
    coord.txns["dv-exhaust"].producer_epoch = ep = 32766  # as if bumped that many times
    pid = r.producer_id
    assert set(add_codes(await c.call(add_partitions("dv-exhaust", pid, ep, "dv-exhaust", [0]))).values()) == {0}
    assert prod_code(await c.call(rq.produce("dv-exhaust", 0, txn_batch(pid, ep, 0)))) == 0
    assert coord.abort_timed_out(now=coord.txns["dv-exhaust"].start_ms + 3_600_000) == 1
    meta = coord.txns["dv-exhaust"]
    assert (meta.state, meta.producer_epoch) == (tl.COMPLETE_ABORT, 32767)
    assert control_types(broker.broker.get_log("dv-exhaust", 0)) == [("ABORT", 32767)]
    # the timed-out instance can neither start another transaction nor produce nor commit
    again = await c.call(add_partitions("dv-exhaust", pid, ep, "dv-exhaust", [1]))
    assert set(add_codes(again).values()) == {ErrorCode.producer_fenced}
    assert prod_code(await c.call(rq.produce("dv-exhaust", 0, txn_batch(pid, ep, 2)))) != 0
    assert (await c.call(end_txn("dv-exhaust", pid, ep, True))).error_code == ErrorCode.producer_fenced
    # a new instance gets a new producer id
    fresh = await c.call(init("dv-exhaust"))
    assert fresh.error_code == 0 and fresh.producer_id != pid and fresh.producer_epoch == 0


async def test_timeout_at_the_last_client_epoch_rotates_the_producer_id_at_tv2(broker):
    """transaction.version 2: the coordinator's abort of a transaction at epoch 32766 fences with
    32767 and, once the markers are written, moves the id to a new producer id at epoch 0
    (KAFKA-20090); the old instance is refused as Kafka refuses it."""
    c = await broker.connect()
    await c.call(rq.metadata(["dv-rotate"]))
    r = await c.call(init("dv-rotate"))
    coord = broker.broker.txn_coordinator
    coord.txns["dv-rotate"].producer_epoch = ep = 32766
    pid = r.producer_id
    assert set(add_codes(await c.call(add_partitions("dv-rotate", pid, ep, "dv-rotate", [0]))).values()) == {0}
    assert prod_code(await c.call(rq.produce("dv-rotate", 0, txn_batch(pid, ep, 0)))) == 0
    assert coord.abort_timed_out(now=coord.txns["dv-rotate"].start_ms + 3_600_000) == 1
    meta = coord.txns["dv-rotate"]
    assert (meta.state, meta.producer_epoch, meta.last_producer_id) == (tl.COMPLETE_ABORT, 0, pid)
    assert meta.producer_id != pid
    assert control_types(broker.broker.get_log("dv-rotate", 0)) == [("ABORT", 32767)]
    again = await c.call(add_partitions("dv-rotate", pid, ep, "dv-rotate", [1]))
    assert set(add_codes(again).values()) == {ErrorCode.invalid_producer_id_mapping}
    # taken for a retry of an EndTxn (the old id at 32766): the aborted transaction cannot commit
    assert (await c.call(end_txn("dv-rotate", pid, ep, True, version=5))).error_code == ErrorCode.invalid_txn_state
    assert (await c.call(end_txn("dv-rotate", pid, ep, True, version=4))).error_code == \
        ErrorCode.invalid_producer_id_mapping


# -- 3. a transactional batch with an epoch above the coordinator's is refused --------------------
# TransactionCoordinator.handleVerifyPartitionsInTransaction: producerEpoch != current -> PRODUCER_FENCED,
# which AddPartitionsToTxnManager reports to Produce as INVALID_PRODUCER_EPOCH.

async def test_batch_from_a_future_epoch_is_refused_and_lso_moves_on(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["dv-future"]))
    r = await c.call(init("dv-future"))
    pid, ep = r.producer_id, r.producer_epoch
    await c.call(add_partitions("dv-future", pid, ep, "dv-future", [0]))
    plog = broker.broker.get_log("dv-future", 0)
    assert prod_code(await c.call(rq.produce("dv-future", 0, txn_batch(pid, ep + 1, 0)))) == \
        ErrorCode.invalid_producer_epoch
    assert plog.log_end_offset == 0
    assert prod_code(await c.call(rq.produce("dv-future", 0, txn_batch(pid, ep, 0)))) == 0
    assert (await c.call(end_txn("dv-future", pid, ep, True))).error_code == 0
    assert plog.last_stable_offset == plog.high_watermark == 3


# -- 4. AddPartitionsToTxn with an internal topic ------------------------------------------------
# KafkaApis.handleAddPartitionsToTxnRequest (v0-v3): internal topics are filtered out before
# authorization, so they answer TOPIC_AUTHORIZATION_FAILED; the rest OPERATION_NOT_ATTEMPTED.

async def test_internal_topics_cannot_join_a_transaction_and_restart_works(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"), num_partitions=2)
    running = await start(cfg)
    try:
        c = await RawClient.connect(running.port)
        await c.call(rq.metadata(["dv-internal"]))
        r = await c.call(init("dv-internal"))  # creates __transaction_state
        pid, ep = r.producer_id, r.producer_epoch
        for version in (0, 1, 2, 3):
            for internal in ("__transaction_state", "__consumer_offsets"):
                codes = add_codes(await c.call(add_partitions(
                    "dv-internal", pid, ep, internal, [0], version=version)))
                assert codes == {(internal, 0): ErrorCode.topic_authorization_failed}, (version, codes)
        from kio.index import load_request_schema

        from minibroker_protocol.build import build, nested
        cls = load_request_schema(24, 3)
        T = nested(cls, "AddPartitionsToTxnTopic")
        mixed = build(cls, v3_and_below_transactional_id="dv-internal", v3_and_below_producer_id=pid,
                      v3_and_below_producer_epoch=ep, v3_and_below_topics=(
                          build(T, name="dv-internal", partitions=(0,)),
                          build(T, name="__transaction_state", partitions=(0,)),
                          build(T, name="nope-unknown", partitions=(0,))))
        assert add_codes(await c.call(mixed)) == {
            ("dv-internal", 0): ErrorCode.operation_not_attempted,
            ("__transaction_state", 0): ErrorCode.topic_authorization_failed,
            ("nope-unknown", 0): ErrorCode.unknown_topic_or_partition}
        meta = running.broker.txn_coordinator.txns["dv-internal"]
        assert meta.state == tl.EMPTY and not meta.partitions
        await c.close()
    finally:
        await running.close()
    running = await start(cfg)  # nothing the client sent can keep the broker from starting
    await running.close()


# -- 5. a producer whose state expired comes back with a sequence above 0 --------------------------
# ProducerAppendInfo.checkSequence (Kafka >= 2.5, KIP-360): no known epoch -> any sequence.

async def test_expired_transactional_producer_carries_on(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"), num_partitions=1,
                 producer_id_expiration_ms=300, producer_id_expiration_check_interval_ms=100)
    running = await start(cfg)
    try:
        c = await RawClient.connect(running.port)
        await c.call(rq.metadata(["dv-expired"]))
        r = await c.call(init("dv-expired"))
        pid, ep = r.producer_id, r.producer_epoch
        await c.call(add_partitions("dv-expired", pid, ep, "dv-expired", [0]))
        assert prod_code(await c.call(rq.produce("dv-expired", 0, txn_batch(pid, ep, 0)))) == 0
        assert (await c.call(end_txn("dv-expired", pid, ep, True))).error_code == 0
        plog = running.broker.get_log("dv-expired", 0)
        for _ in range(50):
            if plog.producer_state.get(pid) is None:
                break
            await asyncio.sleep(0.1)
        assert plog.producer_state.get(pid) is None, "the producer's state did not expire"
        await c.call(add_partitions("dv-expired", pid, ep, "dv-expired", [0]))
        resp = await c.call(rq.produce("dv-expired", 0, txn_batch(pid, ep, 2)))
        assert (prod_code(resp), part(resp).base_offset) == (0, 3)
        assert (await c.call(end_txn("dv-expired", pid, ep, True))).error_code == 0
        assert plog.last_stable_offset == plog.high_watermark == 6
        await c.close()
    finally:
        await running.close()
