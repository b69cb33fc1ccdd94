"""read_committed over transactions that span many segments, starting anywhere.

Five transactions of one producer (commit, abort, commit, abort, commit; 150 records of ~1 KiB
each) go to one partition of a broker with 64 KiB segments, so every transaction spans
several segments and the aborted ones are recorded in several ``.txnindex`` files. Consumers
then read with read_committed from the beginning and from offsets *inside* an aborted
transaction (the broker must still list that transaction in AbortedTransactions, although it
began before the fetch offset), with small fetches (librdkafka) so every response covers only a
part of a transaction; then the same after a kill -9 and restart (indexes and producer state
rebuilt from disk). librdkafka and the Java consumer (java/TxnDriver.java ``read``) must see
exactly the committed records at or after the start offset.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, TopicPartition

from . import wire
from .clients import create_topic
from .test_txn_support import READ_COMMITTED, consumer, produce_sync, run_java_txn, txn_id, txn_producer

PLAN = ["commit", "abort", "commit", "abort", "commit"]
PER_TXN = 150
SPAN = PER_TXN + 1  # records + marker
PAD = b"q" * 1000
SMALL_FETCH = {"fetch.max.bytes": 20000, "max.partition.fetch.bytes": 20000, "message.max.bytes": 20000,
               "receive.message.max.bytes": 100000}


def value(k: int, i: int) -> bytes:
    return f"t{k}-{i}|".encode() + PAD


def expected_from(start: int) -> list[tuple[int, bytes]]:
    return [(k * SPAN + i, value(k, i)) for k, o in enumerate(PLAN) if o == "commit"
            for i in range(PER_TXN) if k * SPAN + i >= start]


def read_committed_from(b, topic: str, start: int, extra: dict, timeout: float = 20.0):
    end = wire.high_watermarks(b.port, topic, [0])[0]
    c = consumer(b.bootstrap_servers, READ_COMMITTED, **extra)
    out = []
    try:
        c.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + timeout
        done = False
        for _ in range(10_000):
            if done or time.monotonic() > deadline:
                break
            for m in c.consume(num_messages=1000, timeout=0.2):
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, f"{err.name()}: {err.str()}"
                    done = done or m.offset() >= end
                    continue
                out.append((m.offset(), m.value()))
    finally:
        c.close()
    assert done, f"read_committed from {start} did not reach the end ({end}) in {timeout} s; read {len(out)}"
    return out


# Starts: the beginning, inside the first aborted transaction, its last record, its ABORT
# marker, inside the second aborted one.
STARTS = [0, SPAN + 50, SPAN + PER_TXN - 1, SPAN + PER_TXN, 3 * SPAN + 10]


def test_read_committed_from_inside_aborted_transactions(broker_factory, topic):
    b = broker_factory(["--num-partitions", "1", "--segment-bytes", str(64 * 1024)])
    create_topic(b.bootstrap_servers, topic, 1)
    p = txn_producer(b.bootstrap_servers, txn_id("segments"), **{"batch.size": 16384})
    p.init_transactions(20)
    for k, outcome in enumerate(PLAN):
        p.begin_transaction()
        acked = produce_sync(p, topic, [(0, value(k, i)) for i in range(PER_TXN)])
        assert sorted(o for _, o in acked.values()) == list(range(k * SPAN, k * SPAN + PER_TXN))
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(20)
    p.flush(5)
    segments = sorted((b.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 8, f"expected the transactions to span many segments: {segments}"

    runs = [("live", start, "small fetches") for start in STARTS] + [
        ("live", 0, "default fetch"), ("live", SPAN + 50, "default fetch"),
        ("after kill -9", 0, "small fetches"), ("after kill -9", SPAN + 50, "small fetches")]
    for phase, start, label in runs:
        if phase != "live" and b.starts == 1:
            b.kill9()
            b.restart(graceful=False)
        got = read_committed_from(b, topic, start, SMALL_FETCH if label == "small fetches" else {})
        want = expected_from(start)
        assert got == want, (
            f"{phase}, librdkafka read_committed from {start} ({label}): {len(got)} records, "
            f"expected {len(want)}; first differences: "
            f"{[(g[0], g[1][:10]) for g, w in zip(got, want) if g != w][:3]} "
            f"tags seen {sorted({v.split(b'-')[0].decode() for _, v in got})}")

    # The Java consumer (aborted batches dropped only through AbortedTransactions).
    for start in (0, SPAN + 50):
        res = run_java_txn("read", b.bootstrap_servers, topic, 1, READ_COMMITTED, start, 0)
        assert not res["errors"], res["errors"]
        assert res["end_offsets"] == [[0, len(PLAN) * SPAN]], res["end_offsets"]
        got = [(off, v.encode()) for _, off, v in res["records"]]
        assert got == expected_from(start), (
            f"Java read_committed from {start}: {len(got)} records, expected {len(expected_from(start))}; "
            f"tags seen {sorted({v.split(b'-')[0].decode() for _, v in got})}")
