"""Transactions with librdkafka (confluent-kafka): commit/abort, zombie fencing, LSO blocking,
transaction timeout. Consumers use assign() only (no group coordinator in minibroker yet).

Offsets are exact: a transaction's records to one partition are contiguous (one producer, one
flush per transaction) and each COMMIT/ABORT marker takes exactly one offset, so every test
knows where each record and each marker must land.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from . import wire
from .clients import create_topic
from .support import project_broker
from .test_txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_BROKER_ARGS,
    check_in_offset_order,
    consumer,
    log_events,
    produce_sync,
    read_all,
    txn_id,
    txn_producer,
    values_by_partition,
    wait_for_event,
)


@pytest.fixture(scope="module")
def txn_broker():
    b = project_broker(TXN_BROKER_ARGS, name="test_txn_librdkafka")
    try:
        b.start()
        yield b
    finally:
        b.close()


def assert_fenced(exc: KafkaException, what: str) -> KafkaError:
    err = exc.args[0]
    assert isinstance(err, KafkaError), f"{what}: {exc!r}"
    assert err.code() == KafkaError._FENCED and err.fatal(), (
        f"{what}: expected a fatal _FENCED error, got {err.name()} (fatal={err.fatal()}, "
        f"abortable={err.txn_requires_abort()}, retriable={err.retriable()}): {err.str()}")
    return err


# -- 1. commit / abort / commit across several partitions ---------------------------------------

PARTS = 3
PER_PART = 20


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_commit_abort_commit(txn_broker, topic, codec):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, PARTS)
    tid = txn_id("cac")
    p = txn_producer(b.bootstrap_servers, tid, **{"compression.type": codec})
    p.init_transactions(20)
    outcomes = ["commit", "abort", "commit"]
    expected_all = {q: [] for q in range(PARTS)}
    expected_committed = {q: [] for q in range(PARTS)}
    for k, outcome in enumerate(outcomes):
        p.begin_transaction()
        items = [(q, f"t{k}-p{q}-{i}|".encode() + b"v" * ((i * 37 + k) % 400))
                 for q in range(PARTS) for i in range(PER_PART)]
        acked = produce_sync(p, topic, items)
        for q, value in items:
            i = items.index((q, value)) % PER_PART
            want = k * (PER_PART + 1) + i  # PER_PART records + 1 marker per earlier transaction
            assert acked[value] == (q, want), f"{value[:12]!r} acked at {acked[value]}, expected {(q, want)}"
            expected_all[q].append((want, value))
            if outcome == "commit":
                expected_committed[q].append((want, value))
        if outcome == "commit":
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    p.flush(5)

    end = len(outcomes) * (PER_PART + 1)
    assert wire.high_watermarks(b.port, topic, range(PARTS)) == {q: end for q in range(PARTS)}

    committed = read_all(b, topic, range(PARTS), READ_COMMITTED)
    uncommitted = read_all(b, topic, range(PARTS), READ_UNCOMMITTED)
    check_in_offset_order(committed)
    check_in_offset_order(uncommitted)
    # Exactly the committed records (no aborted one, no marker) / every data record (no marker).
    assert values_by_partition(committed) == expected_committed
    assert values_by_partition(uncommitted) == expected_all

    mine = [e for e in log_events(b, "txn.committed") if e.get("transactional_id") == tid]
    aborted = [e for e in log_events(b, "txn.aborted") if e.get("transactional_id") == tid]
    assert (len(mine), len(aborted)) == (2, 1), [e["_line"] for e in mine + aborted]
    assert aborted[0]["reason"] == "client abort", aborted[0]["_line"]


# -- 2. zombie fencing ------------------------------------------------------------------------

@pytest.mark.parametrize("next_call", ["commit", "produce"])
def test_zombie_fencing(txn_broker, topic, next_call):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, 2)
    tid = txn_id("zombie")
    a = txn_producer(b.bootstrap_servers, tid)
    a.init_transactions(20)
    a.begin_transaction()
    acked_a = produce_sync(a, topic, [(0, b"zombie-0|"), (0, b"zombie-1|"), (1, b"zombie-2|")])
    assert sorted(acked_a.values()) == [(0, 0), (0, 1), (1, 0)]

    bprod = txn_producer(b.bootstrap_servers, tid)
    bprod.init_transactions(20)  # fences A; A's open transaction is aborted first
    fence = wait_for_event(b, "txn.fencing_abort", 5, transactional_id=tid)
    assert fence["old_epoch"] == "0" and fence["new_epoch"] == "1", fence["_line"]

    if next_call == "produce":
        # The broker rejects the zombie's batch (INVALID_PRODUCER_EPOCH: its epoch is older than
        # the partition's); librdkafka turns that into a fatal _FENCED error, raised by flush().
        # (No delivery callback: confluent-kafka raises the fatal error inside it as a SystemError.)
        a.produce(topic, value=b"zombie-3|", partition=0)
        with pytest.raises(KafkaException) as ei:
            a.flush(15)
        assert_fenced(ei.value, "zombie produce")
        rejected = [e for e in log_events(b, "produce.rejected") if e.get("topic") == topic]
        assert rejected and rejected[0]["error"] == "invalid_producer_epoch", [e["_line"] for e in rejected]
    with pytest.raises(KafkaException) as ei:
        a.commit_transaction(15)
    assert_fenced(ei.value, f"zombie commit after {next_call}")
    assert any(e.get("transactional_id") == tid for e in log_events(b, "txn.request_fenced")
               ) or next_call == "produce", "the broker did not log the fenced EndTxn"

    bprod.begin_transaction()
    acked_b = produce_sync(bprod, topic, [(0, b"successor-0|")])
    bprod.commit_transaction(20)
    # p0: zombie-0, zombie-1, ABORT(epoch 1), successor-0, COMMIT; p1: zombie-2, ABORT.
    assert acked_b[b"successor-0|"] == (0, 3)
    assert wire.high_watermarks(b.port, topic, [0, 1]) == {0: 5, 1: 2}

    committed = values_by_partition(read_all(b, topic, [0, 1], READ_COMMITTED))
    uncommitted = values_by_partition(read_all(b, topic, [0, 1], READ_UNCOMMITTED))
    assert committed == {0: [(3, b"successor-0|")], 1: []}
    assert uncommitted == {0: [(0, b"zombie-0|"), (1, b"zombie-1|"), (3, b"successor-0|")],
                           1: [(0, b"zombie-2|")]}


# -- 3. LSO blocking ---------------------------------------------------------------------------

def _drain(c, seconds: float, into: dict, eof: set | None = None) -> None:
    deadline = time.monotonic() + seconds
    for _ in range(10_000):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        for m in c.consume(num_messages=500, timeout=min(0.2, left)):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if eof is not None:
                        eof.add((m.partition(), m.offset()))
                    continue
                raise AssertionError(f"consumer error {err.name()}: {err.str()}")
            into.setdefault(m.partition(), []).append((m.offset(), m.value()))


def _wait_records(c, into: dict, want: dict[int, int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for _ in range(10_000):
        if all(len(into.get(q, [])) >= n for q, n in want.items()) or time.monotonic() > deadline:
            break
        _drain(c, 0.2, into)
    got = {q: len(into.get(q, [])) for q in want}
    assert all(got[q] >= n for q, n in want.items()), f"got {got} records, wanted {want} within {timeout} s"


@pytest.mark.parametrize("ending", ["commit", "abort"])
def test_lso_blocks_read_committed(txn_broker, topic, ending):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, 2)
    a = txn_producer(b.bootstrap_servers, txn_id("lso-open"))
    a.init_transactions(20)
    a.begin_transaction()
    produce_sync(a, topic, [(0, f"open-{i}|".encode()) for i in range(3)])  # p0 offsets 0..2, left open

    other = txn_producer(b.bootstrap_servers, txn_id("lso-other"))
    other.init_transactions(20)
    other.begin_transaction()
    acked = produce_sync(other, topic, [(0, f"later-{i}|".encode()) for i in range(3)]
                         + [(1, f"other-{i}|".encode()) for i in range(3)])
    other.commit_transaction(20)
    assert sorted(v for v in acked.values() if v[0] == 0) == [(0, 3), (0, 4), (0, 5)]
    # p0: open-0..2 (open), later-0..2, COMMIT@6; p1: other-0..2, COMMIT@3
    assert wire.high_watermarks(b.port, topic, [0, 1]) == {0: 7, 1: 4}

    rc = consumer(b.bootstrap_servers, READ_COMMITTED)
    ru = consumer(b.bootstrap_servers, READ_UNCOMMITTED)
    try:
        tps = [TopicPartition(topic, q, OFFSET_BEGINNING) for q in (0, 1)]
        rc.assign(tps)
        ru.assign(tps)
        # The last stable offset of p0 is the open transaction's first offset; p1 is stable.
        assert rc.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
        assert rc.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 4)
        assert ru.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 7)

        got_rc: dict = {}
        got_ru: dict = {}
        _wait_records(rc, got_rc, {1: 3}, timeout=15)  # the other partition keeps flowing
        _wait_records(ru, got_ru, {0: 6, 1: 3}, timeout=15)
        _drain(rc, 1.0, got_rc)  # and p0 stays held back, later committed data included
        assert got_rc == {1: [(0, b"other-0|"), (1, b"other-1|"), (2, b"other-2|")]}, got_rc
        assert [v for _, v in got_ru[0]] == [b"open-0|", b"open-1|", b"open-2|",
                                            b"later-0|", b"later-1|", b"later-2|"]

        # The open transaction ends: the waiting read_committed consumer gets p0, in offset order.
        (a.commit_transaction if ending == "commit" else a.abort_transaction)(20)
        expected_p0 = ([(i, f"open-{i}|".encode()) for i in range(3)] if ending == "commit" else []) + [
            (3 + i, f"later-{i}|".encode()) for i in range(3)]
        _wait_records(rc, got_rc, {0: len(expected_p0)}, timeout=15)
        _drain(rc, 0.5, got_rc)
        assert got_rc[0] == expected_p0, got_rc[0]
        assert rc.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 8)
    finally:
        rc.close()
        ru.close()


# -- 4. transaction timeout (the seeds' incident) ---------------------------------------------------

TIMEOUT_MS = 1500


def test_transaction_timeout_fences_stalled_producer(txn_broker, topic):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, 1)
    tid = txn_id("stalled")
    conf = {"transaction.timeout.ms": TIMEOUT_MS, "message.timeout.ms": TIMEOUT_MS,
            "socket.timeout.ms": 1000}
    a = txn_producer(b.bootstrap_servers, tid, **conf)
    a.init_transactions(20)
    a.begin_transaction()
    t0 = time.monotonic()
    produce_sync(a, topic, [(0, b"stalled-0|"), (0, b"stalled-1|")])

    # The producer stalls; the coordinator aborts the transaction after transaction.timeout.ms.
    ev = wait_for_event(b, "txn.timed_out", 15, transactional_id=tid)
    assert time.monotonic() - t0 >= TIMEOUT_MS / 1000 - 0.1
    assert ev["timeout_ms"] == str(TIMEOUT_MS) and int(ev["age_ms"]) >= TIMEOUT_MS, ev["_line"]
    assert ev["epoch"] == "0" and "PRODUCER_FENCED" in ev["_line"], ev["_line"]
    aborted = wait_for_event(b, "txn.aborted", 5, transactional_id=tid)
    assert aborted["epoch"] == "1" and "transaction.timeout.ms" in aborted["_line"], aborted["_line"]

    with pytest.raises(KafkaException) as ei:
        a.commit_transaction(15)
    assert_fenced(ei.value, "commit after the coordinator's timeout abort")
    refused = wait_for_event(b, "txn.request_fenced", 5, transactional_id=tid)
    assert refused["api"] == "EndTxn" and refused["epoch"] == "0" and refused["current_epoch"] == "1", \
        refused["_line"]

    # A new instance carries on.
    n = txn_producer(b.bootstrap_servers, tid, **conf)
    n.init_transactions(20)
    n.begin_transaction()
    produce_sync(n, topic, [(0, b"after-0|")])
    n.commit_transaction(20)
    # stalled-0, stalled-1, ABORT(epoch 1), after-0 (epoch 2), COMMIT
    assert values_by_partition(read_all(b, topic, [0], READ_COMMITTED)) == {0: [(3, b"after-0|")]}
    assert values_by_partition(read_all(b, topic, [0], READ_UNCOMMITTED)) == {
        0: [(0, b"stalled-0|"), (1, b"stalled-1|"), (3, b"after-0|")]}
