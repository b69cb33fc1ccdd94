"""Transactions with the stock Java client (kafka-clients 4.3.0, java/TxnDriver.java):
commit/abort/commit read back by Java consumers (assign(), both isolation levels — the Java
consumer drops aborted batches only through Fetch's AbortedTransactions list) and by librdkafka;
zombie fencing (ProducerFencedException); transaction timeout (the seeds' incident); the Java
read_committed consumer held back by an open transaction (LSO).
"""

from __future__ import annotations

import pytest

from minibroker.testing import requests_seen

from . import wire
from .clients import create_topic
from .support import project_broker
from .test_txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_BROKER_ARGS,
    log_events,
    produce_sync,
    read_all,
    run_java_txn,
    txn_id,
    txn_producer,
    values_by_partition,
    wait_for_event,
)

FENCED = "org.apache.kafka.common.errors.ProducerFencedException"


@pytest.fixture(scope="module")
def txn_broker():
    b = project_broker(TXN_BROKER_ARGS, name="test_txn_java")
    try:
        b.start()
        yield b
    finally:
        b.close()


PARTS = 3
PER_PART = 15


def test_java_commit_abort_commit(txn_broker, topic):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, PARTS)
    tid = txn_id("java-cac")
    res = run_java_txn("commit-abort", b.bootstrap_servers, topic, PARTS, PER_PART, tid)
    assert not res["errors"], res["errors"]

    def value(k, p, i):
        return f"t{k}-p{p}-{i}|" + "x" * ((i * 37 + k * 11) % 300)

    # Each transaction's records are contiguous per partition, then one marker offset.
    sent = {(k, p, i): off for k, p, i, off in res["sent"]}
    assert len(sent) == 3 * PARTS * PER_PART
    for (k, p, i), off in sent.items():
        assert off == k * (PER_PART + 1) + i, f"t{k}-p{p}-{i} acknowledged at offset {off}"
    assert wire.high_watermarks(b.port, topic, range(PARTS)) == {p: 3 * (PER_PART + 1) for p in range(PARTS)}

    expected = {iso: {p: [] for p in range(PARTS)} for iso in (READ_COMMITTED, READ_UNCOMMITTED)}
    for k in range(3):
        for p in range(PARTS):
            for i in range(PER_PART):
                entry = (k * (PER_PART + 1) + i, value(k, p, i))
                expected[READ_UNCOMMITTED][p].append(entry)
                if k != 1:
                    expected[READ_COMMITTED][p].append(entry)

    for iso in (READ_COMMITTED, READ_UNCOMMITTED):
        got = {p: [] for p in range(PARTS)}
        for p, off, v in res[iso]:
            got[p].append((off, v))
        assert got == expected[iso], f"Java consumer, {iso}: differs from the expected records"
        # librdkafka reads the Java producer's transactions the same way.
        lib = values_by_partition(read_all(b, topic, range(PARTS), iso))
        assert lib == {p: [(o, v.encode()) for o, v in recs] for p, recs in expected[iso].items()}, \
            f"librdkafka, {iso}: differs from the expected records"

    ends = [e for e in log_events(b, "txn.committed") + log_events(b, "txn.aborted")
            if e.get("transactional_id") == tid]
    assert len(ends) == 3, [e["_line"] for e in ends]

    # The path the Java client took at transaction.version 2, the broker's default (issue 16: request
    # counts): no AddPartitionsToTxn, Produce v12 registered the partitions, every EndTxn was v5.
    java = {(api, v) for api, v, software in requests_seen(b.log_text()) if software == "apache-kafka-java"}
    assert {"InitProducerId", "EndTxn", "Produce", "Fetch"} <= {api for api, _ in java}, java
    assert "AddPartitionsToTxn" not in {api for api, _ in java}, java
    assert {v for api, v in java if api == "EndTxn"} == {5}, java
    assert min(v for api, v in java if api == "Produce") >= 12, java
    # every EndTxn bumped the epoch: the three transactions ran at epochs 0, 1, 2
    assert sorted(int(e["epoch"]) for e in ends) == [1, 2, 3], [e["_line"] for e in ends]


def test_java_zombie_fencing(txn_broker, topic):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, 2)
    tid = txn_id("java-zombie")
    res = run_java_txn("fence", b.bootstrap_servers, topic, tid)
    assert not res["errors"], res["errors"]
    assert sorted(map(tuple, res["a_sent"])) == [(0, 0), (1, 0)]
    assert res["a_commit_error"] and res["a_commit_error"].startswith(FENCED + ":"), (
        f"the zombie's commitTransaction: {res['a_commit_error']} (cause {res['a_commit_error_cause']})")
    assert res["b_committed"] and res["b_sent"] == [[0, 2]], res
    fence = wait_for_event(b, "txn.fencing_abort", 5, transactional_id=tid)
    assert (fence["old_epoch"], fence["new_epoch"], fence["partitions"]) == ("0", "1", "2"), fence["_line"]

    # p0: zombie-0, ABORT, successor-0, COMMIT; p1: zombie-1, ABORT
    assert wire.high_watermarks(b.port, topic, [0, 1]) == {0: 4, 1: 2}
    assert values_by_partition(read_all(b, topic, [0, 1], READ_COMMITTED)) == {0: [(2, b"successor-0")], 1: []}
    assert values_by_partition(read_all(b, topic, [0, 1], READ_UNCOMMITTED)) == {
        0: [(0, b"zombie-0"), (2, b"successor-0")], 1: [(0, b"zombie-1")]}


TIMEOUT_MS = 1500


@pytest.fixture(scope="module")
def txn_broker_tv1():
    b = project_broker(TXN_BROKER_ARGS + ["--transaction-version", "1"], name="test_txn_java-tv1")
    try:
        b.start()
        yield b
    finally:
        b.close()


@pytest.mark.parametrize("level", [1, 2])
def test_java_transaction_timeout(txn_broker, txn_broker_tv1, topic, level):
    """The seeds' incident: a producer stalls past transaction.timeout.ms, the coordinator aborts its
    transaction with a bumped epoch. At transaction.version 1 its commit then fails with
    ProducerFencedException; at 2 (Kafka 4's default) the commit, one epoch behind, is taken for
    a retry of a commit and answered INVALID_TXN_STATE, as Kafka 4.4 answers it
    (tests/differential/test_transactions_v2.py) — InvalidTxnStateException in the client."""
    b = txn_broker_tv1 if level == 1 else txn_broker
    create_topic(b.bootstrap_servers, topic, 1)
    tid = txn_id("java-stalled")
    # The producer stalls 2.5 s past its timeout: the coordinator (abort check every 200 ms) has
    # aborted the transaction by then, even on a loaded machine.
    res = run_java_txn("timeout", b.bootstrap_servers, topic, tid, TIMEOUT_MS, TIMEOUT_MS + 2500)
    assert not res["errors"], res["errors"]
    assert res["a_sent"] == [[0, 0]], res
    expected = FENCED if level == 1 else "org.apache.kafka.common.errors.InvalidTxnStateException"
    assert res["a_commit_error"] and res["a_commit_error"].startswith(expected + ":"), (
        f"the stalled producer's commitTransaction: {res['a_commit_error']} "
        f"(cause {res['a_commit_error_cause']})")
    assert res["b_committed"] and res["b_sent"] == [[0, 2]], res

    # The broker's log explains it.
    ev = wait_for_event(b, "txn.timed_out", 5, transactional_id=tid)
    assert ev["timeout_ms"] == str(TIMEOUT_MS) and int(ev["age_ms"]) >= TIMEOUT_MS, ev["_line"]
    aborted = wait_for_event(b, "txn.aborted", 5, transactional_id=tid)
    assert "transaction.timeout.ms" in aborted["_line"], aborted["_line"]
    if level == 1:
        refused = wait_for_event(b, "txn.request_fenced", 5, transactional_id=tid)
        assert refused["api"] == "EndTxn", refused["_line"]
    else:
        refused = wait_for_event(b, "end_txn.refused", 5, transactional_id=tid)
        assert refused["error"] == "invalid_txn_state", refused["_line"]

    assert values_by_partition(read_all(b, topic, [0], READ_COMMITTED)) == {0: [(2, b"after-timeout-0")]}
    assert values_by_partition(read_all(b, topic, [0], READ_UNCOMMITTED)) == {
        0: [(0, b"stalled-0"), (2, b"after-timeout-0")]}


def test_java_consumer_lso_blocking(txn_broker, topic):
    """An open transaction (librdkafka producer) holds the Java read_committed consumer back on
    its partition — endOffsets() is the last stable offset — while the other partition flows."""
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, 2)
    a = txn_producer(b.bootstrap_servers, txn_id("java-lso-open"))
    a.init_transactions(20)
    a.begin_transaction()
    produce_sync(a, topic, [(0, f"open-{i}|".encode()) for i in range(3)])
    other = txn_producer(b.bootstrap_servers, txn_id("java-lso-other"))
    other.init_transactions(20)
    other.begin_transaction()
    produce_sync(other, topic, [(0, f"later-{i}|".encode()) for i in range(3)]
                 + [(1, f"other-{i}|".encode()) for i in range(3)])
    other.commit_transaction(20)

    held = run_java_txn("read", b.bootstrap_servers, topic, 2, READ_COMMITTED, -1, 1000)
    assert not held["errors"], held["errors"]
    assert held["end_offsets"] == [[0, 0], [1, 4]], f"read_committed endOffsets: {held['end_offsets']}"
    assert held["records"] == [[1, i, f"other-{i}|"] for i in range(3)], held["records"]
    loose = run_java_txn("read", b.bootstrap_servers, topic, 2, READ_UNCOMMITTED, -1, 0)
    assert loose["end_offsets"] == [[0, 7], [1, 4]], loose["end_offsets"]
    assert [r[2] for r in loose["records"] if r[0] == 0] == [
        "open-0|", "open-1|", "open-2|", "later-0|", "later-1|", "later-2|"]

    a.commit_transaction(20)
    free = run_java_txn("read", b.bootstrap_servers, topic, 2, READ_COMMITTED, -1, 0)
    assert not free["errors"], free["errors"]
    assert free["end_offsets"] == [[0, 8], [1, 4]], free["end_offsets"]
    assert [r[1:] for r in free["records"] if r[0] == 0] == (
        [[i, f"open-{i}|"] for i in range(3)] + [[3 + i, f"later-{i}|"] for i in range(3)])
