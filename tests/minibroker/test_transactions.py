"""The transaction coordinator over the wire: InitProducerId, AddPartitions, EndTxn, fencing."""

from __future__ import annotations

import asyncio
import datetime

from minibroker.app import start
from minibroker.config.options import Config, FsyncPolicy
from minibroker_protocol import txn_log as tl
from minibroker_protocol.batch import iter_headers
from minibroker_protocol.errors import ErrorCode
from minibroker_protocol.records import build_batch, decode_batch, parse_control_record

from . import requests as rq
from .conftest import RawClient


def init(tid, version=4, timeout_ms=60_000, pid=-1, epoch=-1):
    return rq.req(22, version, transactional_id=tid,
                  transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                  producer_id=pid, producer_epoch=epoch)


def add_partitions(tid, pid, epoch, topic, partitions, version=3):
    from kio.index import load_request_schema

    from minibroker_protocol.build import build, nested
    cls = load_request_schema(24, version)
    T = nested(cls, "AddPartitionsToTxnTopic")
    return build(cls, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                 v3_and_below_producer_epoch=epoch,
                 v3_and_below_topics=(build(T, name=topic, partitions=tuple(partitions)),))


def end_txn(tid, pid, epoch, commit, version=3):
    return rq.req(26, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                  committed=commit)


def txn_batch(pid, epoch, seq, n=2, tag="v"):
    return build_batch([{"key": b"k", "value": f"{tag}{seq + i}".encode()} for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)


def add_codes(resp):
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def prod_code(resp):
    return resp.responses[0].partition_responses[0].error_code


def control_types(plog):
    view = plog.read(plog.log_start_offset, 1 << 24)
    out = []
    for h in iter_headers(view):
        if h.is_control:
            rec = decode_batch(view, h.position)[0]
            out.append(("COMMIT" if parse_control_record(rec.key)[1] == 1 else "ABORT", h.producer_epoch))
    return out


async def test_init_producer_id_bumps_epoch_for_the_same_id(broker):
    c = await broker.connect()
    a = await c.call(init("t-bump"))
    b = await c.call(init("t-bump"))
    assert (a.error_code, b.error_code) == (0, 0)
    assert b.producer_id == a.producer_id and b.producer_epoch == a.producer_epoch + 1
    other = await c.call(init("t-other"))
    assert other.producer_id != a.producer_id


async def test_init_producer_id_errors(broker):
    c = await broker.connect()
    assert (await c.call(init("t-to", timeout_ms=900_001))).error_code == ErrorCode.invalid_transaction_timeout
    a = await c.call(init("t-kip360"))
    # KIP-360 with the current id/epoch bumps; with a stale epoch is fenced (v4+) / 47 (v3)
    ok = await c.call(init("t-kip360", pid=a.producer_id, epoch=a.producer_epoch))
    assert (ok.error_code, ok.producer_epoch) == (0, a.producer_epoch + 1)
    stale = await c.call(init("t-kip360", pid=a.producer_id, epoch=a.producer_epoch - 1 if a.producer_epoch else 99))
    assert stale.error_code == ErrorCode.producer_fenced
    stale3 = await c.call(init("t-kip360", version=3, pid=a.producer_id, epoch=99))
    assert stale3.error_code == ErrorCode.invalid_producer_epoch


async def test_commit_writes_markers_and_states(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["tx-commit"]))
    r = await c.call(init("t-commit"))
    pid, ep = r.producer_id, r.producer_epoch
    # a transactional batch before AddPartitionsToTxn is refused
    assert prod_code(await c.call(rq.produce("tx-commit", 0, txn_batch(pid, ep, 0)))) == ErrorCode.invalid_txn_state
    codes = add_codes(await c.call(add_partitions("t-commit", pid, ep, "tx-commit", [0, 1])))
    assert set(codes.values()) == {ErrorCode.none}
    assert prod_code(await c.call(rq.produce("tx-commit", 0, txn_batch(pid, ep, 0)))) == 0
    assert (await c.call(end_txn("t-commit", pid, ep, True))).error_code == 0
    # a retried commit is fine, an abort now is not
    assert (await c.call(end_txn("t-commit", pid, ep, True))).error_code == 0
    assert (await c.call(end_txn("t-commit", pid, ep, False))).error_code == ErrorCode.invalid_txn_state
    b = broker.broker
    assert control_types(b.get_log("tx-commit", 0)) == [("COMMIT", ep)]
    assert control_types(b.get_log("tx-commit", 1)) == [("COMMIT", ep)]
    assert b.txn_coordinator.txns["t-commit"].state == tl.COMPLETE_COMMIT


async def test_add_partitions_unknown_partition(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["tx-unknown"]))
    r = await c.call(init("t-unknown"))
    codes = add_codes(await c.call(add_partitions("t-unknown", r.producer_id, r.producer_epoch,
                                                  "tx-unknown", [0, 9])))
    assert codes == {("tx-unknown", 0): ErrorCode.operation_not_attempted,
                     ("tx-unknown", 9): ErrorCode.unknown_topic_or_partition}
    wrong_pid = add_codes(await c.call(add_partitions("t-unknown", r.producer_id + 1000,
                                                      r.producer_epoch, "tx-unknown", [0])))
    assert set(wrong_pid.values()) == {ErrorCode.invalid_producer_id_mapping}
    assert (await c.call(end_txn("t-unknown", r.producer_id, r.producer_epoch, True))).error_code == \
        ErrorCode.invalid_txn_state  # nothing was added: state Empty


async def test_zombie_is_fenced_and_its_transaction_aborted(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["tx-zombie"]))
    old = await c.call(init("t-zombie"))
    pid, ep = old.producer_id, old.producer_epoch
    await c.call(add_partitions("t-zombie", pid, ep, "tx-zombie", [0]))
    assert prod_code(await c.call(rq.produce("tx-zombie", 0, txn_batch(pid, ep, 0)))) == 0
    new = await c.call(init("t-zombie"))
    assert new.error_code == 0 and new.producer_id == pid and new.producer_epoch == ep + 2
    plog = broker.broker.get_log("tx-zombie", 0)
    assert control_types(plog) == [("ABORT", ep + 1)]
    assert plog.last_stable_offset == plog.high_watermark
    # the zombie's next calls fail fenced
    assert prod_code(await c.call(rq.produce("tx-zombie", 0, txn_batch(pid, ep, 2)))) in (
        ErrorCode.invalid_producer_epoch, ErrorCode.invalid_txn_state)
    assert (await c.call(end_txn("t-zombie", pid, ep, True))).error_code == ErrorCode.producer_fenced
    assert (await c.call(end_txn("t-zombie", pid, ep, True, version=1))).error_code == \
        ErrorCode.invalid_producer_epoch


async def test_transaction_timeout_aborts_and_fences(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"),
                 transaction_abort_check_interval_ms=100)
    running = await start(cfg)
    try:
        c = await RawClient.connect(running.port)
        await c.call(rq.metadata(["tx-timeout"]))
        r = await c.call(init("t-timeout", timeout_ms=300))
        pid, ep = r.producer_id, r.producer_epoch
        await c.call(add_partitions("t-timeout", pid, ep, "tx-timeout", [0]))
        assert prod_code(await c.call(rq.produce("tx-timeout", 0, txn_batch(pid, ep, 0)))) == 0
        await asyncio.sleep(1.0)
        meta = running.broker.txn_coordinator.txns["t-timeout"]
        assert meta.state == tl.COMPLETE_ABORT and meta.producer_epoch == ep + 1
        assert control_types(running.broker.get_log("tx-timeout", 0)) == [("ABORT", ep + 1)]
        # the seeds' incident: the stalled producer's commit fails fenced
        assert (await c.call(end_txn("t-timeout", pid, ep, True))).error_code == ErrorCode.producer_fenced
        await c.close()
    finally:
        await running.close()


async def test_prepared_transaction_is_rolled_forward_at_start(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"), num_partitions=2)
    running = await start(cfg)
    c = await RawClient.connect(running.port)
    await c.call(rq.metadata(["tx-roll"]))
    r = await c.call(init("t-roll"))
    pid, ep = r.producer_id, r.producer_epoch
    assert set(add_codes(await c.call(add_partitions("t-roll", pid, ep, "tx-roll", [0, 1]))).values()) == {0}
    assert prod_code(await c.call(rq.produce("tx-roll", 0, txn_batch(pid, ep, 0)))) == 0
    assert running.broker.get_log("tx-roll", 0).last_stable_offset == 0
    # what the coordinator writes first on EndTxn(commit), then "crash" before any marker
    coord = running.broker.txn_coordinator
    meta = coord.txns["t-roll"]
    value = tl.TxnLogValue(pid, ep, meta.timeout_ms, tl.PREPARE_COMMIT,
                           tuple(sorted(meta.partitions)), 0, meta.start_ms)
    coord._log().append(build_batch([{"key": tl.encode_key("t-roll"), "value": tl.encode_value(value)}]),
                        origin="coordinator")
    await c.close()
    await running.close()
    running = await start(cfg)
    try:
        meta = running.broker.txn_coordinator.txns["t-roll"]
        assert meta.state == tl.COMPLETE_COMMIT
        assert control_types(running.broker.get_log("tx-roll", 0)) == [("COMMIT", ep)]
        assert control_types(running.broker.get_log("tx-roll", 1)) == [("COMMIT", ep)]
        plog = running.broker.get_log("tx-roll", 0)
        assert plog.last_stable_offset == plog.high_watermark
        # the producer carries on with a new instance
        c = await RawClient.connect(running.port)
        again = await c.call(init("t-roll"))
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, ep + 1)
        await c.close()
    finally:
        await running.close()


async def test_write_txn_markers_api(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["tx-wire"]))
    r = await c.call(init("t-wire"))
    pid, ep = r.producer_id, r.producer_epoch
    await c.call(add_partitions("t-wire", pid, ep, "tx-wire", [0]))
    await c.call(rq.produce("tx-wire", 0, txn_batch(pid, ep, 0)))
    plog = broker.broker.get_log("tx-wire", 0)
    assert plog.last_stable_offset == 0
    from kio.index import load_request_schema

    from minibroker_protocol.build import build, nested
    cls = load_request_schema(27, 1)
    M, T = nested(cls, "WritableTxnMarker"), nested(cls, "WritableTxnMarkerTopic")
    resp = await c.call(build(cls, markers=(build(
        M, producer_id=pid, producer_epoch=ep, transaction_result=False, coordinator_epoch=0,
        topics=(build(T, name="tx-wire", partition_indexes=(0, 7)),)),)))
    codes = {p.partition_index: p.error_code for p in resp.markers[0].topics[0].partitions}
    assert codes == {0: ErrorCode.none, 7: ErrorCode.unknown_topic_or_partition}
    assert control_types(plog) == [("ABORT", ep)]
    assert plog.last_stable_offset == plog.high_watermark


async def test_read_committed_fetch_and_list_offsets(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["tx-read"]))
    r = await c.call(init("t-read"))
    pid, ep = r.producer_id, r.producer_epoch
    await c.call(add_partitions("t-read", pid, ep, "tx-read", [0]))
    await c.call(rq.produce("tx-read", 0, txn_batch(pid, ep, 0, tag="a")))      # offsets 0-1
    assert (await c.call(end_txn("t-read", pid, ep, False))).error_code == 0    # marker at 2
    await c.call(rq.produce("tx-read", 0, rq.batch(1)))                         # plain, offset 3
    await c.call(add_partitions("t-read", pid, ep, "tx-read", [0]))
    await c.call(rq.produce("tx-read", 0, txn_batch(pid, ep, 2, tag="o")))      # open: 4-5
    lo = await c.call(rq.list_offsets("tx-read", 0, -1, isolation=1))
    assert lo.topics[0].partitions[0].offset == 4
    lo = await c.call(rq.list_offsets("tx-read", 0, -1, isolation=0))
    assert lo.topics[0].partitions[0].offset == 6
    f = await c.call(rq.fetch("tx-read", [(0, 0, 1 << 20)], isolation=1))
    p = f.responses[0].partitions[0]
    assert p.last_stable_offset == 4 and p.high_watermark == 6
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    last_base = max(h.base_offset for h in iter_headers(memoryview(p.records)))
    assert last_base < 4  # nothing at or above the LSO
    f = await c.call(rq.fetch("tx-read", [(0, 0, 1 << 20)], isolation=0))
    assert f.responses[0].partitions[0].aborted_transactions is None
    # a read_committed long poll wakes when the open transaction commits
    task = asyncio.ensure_future(c.call(rq.fetch("tx-read", [(0, 4, 1 << 20)], isolation=1,
                                                 max_wait_ms=5000)))
    c2 = await broker.connect()
    await asyncio.sleep(0.2)
    assert (await c2.call(end_txn("t-read", pid, ep, True))).error_code == 0
    woke = await asyncio.wait_for(task, 3)
    assert woke.responses[0].partitions[0].last_stable_offset == 7


async def test_admin_views(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["tx-admin"]))
    r = await c.call(init("t-admin", timeout_ms=45_000))
    pid, ep = r.producer_id, r.producer_epoch
    await c.call(add_partitions("t-admin", pid, ep, "tx-admin", [1]))
    await c.call(rq.produce("tx-admin", 1, txn_batch(pid, ep, 0)))
    d = await c.call(rq.req(65, 0, transactional_ids=("t-admin",)))
    (a,) = d.transaction_states
    assert (a.error_code, a.transaction_state, a.producer_id, a.producer_epoch) == (0, "Ongoing", pid, ep)
    assert a.transaction_timeout == datetime.timedelta(seconds=45)
    assert [(t.topic, tuple(t.partitions)) for t in a.topics] == [("tx-admin", (1,))]
    # An unknown id is answered with start time -1, as Kafka does; kio's reader
    # refuses negative timestamps, so look at the error code in the raw bytes.
    import struct
    await c.send_raw(c.frame(rq.req(65, 0, transactional_ids=("nope",))))
    size = struct.unpack(">i", await c.reader.readexactly(4))[0]
    raw = await c.reader.readexactly(size)
    # corr id, header tags, throttle, compact array length, then the error code
    assert struct.unpack_from(">h", raw, 4 + 1 + 4 + 1)[0] == ErrorCode.transactional_id_not_found
    lst = await c.call(rq.req(66, 1, state_filters=("Ongoing", "Bogus"), producer_id_filters=(),
                              duration_filter=-1))
    assert [(s.transactional_id, s.transaction_state) for s in lst.transaction_states] == [("t-admin", "Ongoing")]
    assert tuple(lst.unknown_state_filters) == ("Bogus",)
    from kio.index import load_request_schema

    from minibroker_protocol.build import build, nested
    cls = load_request_schema(61, 0)
    T = nested(cls, "TopicRequest")
    dp = await c.call(build(cls, topics=(build(T, name="tx-admin", partition_indexes=(1, 5)),)))
    p1, p5 = dp.topics[0].partitions
    (prod,) = p1.active_producers
    assert (prod.producer_id, prod.producer_epoch, prod.last_sequence, prod.current_txn_start_offset) == (pid, ep, 1, 0)
    assert p5.error_code == ErrorCode.unknown_topic_or_partition


async def test_exhausted_epoch_rotates_the_producer_id(broker):
    c = await broker.connect()
    r = await c.call(init("t-exhaust"))
    meta = broker.broker.txn_coordinator.txns["t-exhaust"]
    meta.producer_epoch = 32766  # as if bumped that many times
    again = await c.call(init("t-exhaust"))
    assert again.error_code == 0
    assert again.producer_id != r.producer_id and again.producer_epoch == 0
    # the old id no longer maps to the transactional id
    assert broker.broker.txn_coordinator.verify_produce(r.producer_id, 32766, "x", 0) == \
        ErrorCode.invalid_producer_id_mapping


async def test_idle_transactional_id_expires(tmp_path):
    cfg = Config(port=0, data_dir=tmp_path / "d", fsync=FsyncPolicy("never"),
                 transactional_id_expiration_ms=300,
                 transactional_id_expiration_check_interval_ms=100)
    running = await start(cfg)
    c = await RawClient.connect(running.port)
    first = await c.call(init("t-expire"))
    await asyncio.sleep(0.8)
    assert "t-expire" not in running.broker.txn_coordinator.txns
    await c.close()
    await running.close()
    # the tombstone is replayed: the id stays forgotten, and comes back with a new producer id
    running = await start(cfg)
    try:
        assert "t-expire" not in running.broker.txn_coordinator.txns
        c = await RawClient.connect(running.port)
        again = await c.call(init("t-expire"))
        assert again.error_code == 0 and again.producer_id != first.producer_id
        assert again.producer_epoch == 0
        await c.close()
    finally:
        await running.close()


async def test_add_offsets_marks_the_offsets_partition(broker):
    c = await broker.connect()
    await c.call(rq.metadata(["tx-offsets"]))
    r = await c.call(init("t-offsets"))
    pid, ep = r.producer_id, r.producer_epoch
    await c.call(add_partitions("t-offsets", pid, ep, "tx-offsets", [0]))
    resp = await c.call(rq.req(25, 3, transactional_id="t-offsets", producer_id=pid,
                               producer_epoch=ep, group_id="my-group"))
    assert resp.error_code == 0
    meta = broker.broker.txn_coordinator.txns["t-offsets"]
    assert ("__consumer_offsets", broker.broker.offsets_partition_for("my-group")) in meta.partitions
    assert (await c.call(end_txn("t-offsets", pid, ep, True))).error_code == 0
    plog = broker.broker.get_log("__consumer_offsets", broker.broker.offsets_partition_for("my-group"))
    assert control_types(plog) == [("COMMIT", ep)]
    # a stale epoch: fenced (v2+) / invalid epoch (v1)
    stale = await c.call(rq.req(25, 1, transactional_id="t-offsets", producer_id=pid,
                                producer_epoch=ep + 5, group_id="g"))
    assert stale.error_code == ErrorCode.invalid_producer_epoch


def test_java_string_hash_matches_java():
    from minibroker.core.java_hash import java_string_hash
    # String.hashCode() values from Java ("polygenelubricants" is the classic Integer.MIN_VALUE)
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648


def test_only_kafkas_transitions_are_legal():
    from minibroker.coordinator.txn.state import TxnState
    _ALLOWED_FROM = {s: s.valid_previous for s in TxnState}
    # TransactionState.validPreviousStates (Kafka 4.x: an empty abort of transactions v2 goes
    # to PrepareAbort from a resting state)
    assert _ALLOWED_FROM[tl.PREPARE_COMMIT] == {tl.ONGOING}
    assert _ALLOWED_FROM[tl.PREPARE_ABORT] == {tl.ONGOING, tl.PREPARE_EPOCH_FENCE, tl.EMPTY,
                                               tl.COMPLETE_COMMIT, tl.COMPLETE_ABORT}
    assert _ALLOWED_FROM[tl.COMPLETE_COMMIT] == {tl.PREPARE_COMMIT}
    assert _ALLOWED_FROM[tl.COMPLETE_ABORT] == {tl.PREPARE_ABORT}
    assert _ALLOWED_FROM[tl.PREPARE_EPOCH_FENCE] == {tl.ONGOING}
    assert _ALLOWED_FROM[tl.DEAD] == {tl.EMPTY, tl.COMPLETE_COMMIT, tl.COMPLETE_ABORT}


async def test_an_illegal_transition_is_refused_before_it_is_written(broker):
    import pytest
    coord = broker.broker.txn_coordinator
    c = await broker.connect()
    await c.call(init("t-illegal"))
    meta = coord.txns["t-illegal"]
    end = coord._log().log_end_offset
    with pytest.raises(AssertionError):
        coord.machine._persist(meta, tl.COMPLETE_COMMIT)  # Empty -> CompleteCommit
    assert meta.state == tl.EMPTY and coord._log().log_end_offset == end
