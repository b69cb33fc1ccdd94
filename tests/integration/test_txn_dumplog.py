"""The seeds' kafka-dump-log scenarios (../shared/seeds/002_*.txt), written with the Java client
exactly as the seed's code does, then printed with ``minibroker dump-log --print-data-log``.

Fixed transactional.id (the "correct" pattern): the second producer's initTransactions fences
the first one, whose open transaction is aborted with a bumped epoch::

    offset: 0 ... producerId: 0 producerEpoch: 5 ... payload: thisIsMessageValue1
    offset: 1 ... producerId: 0 producerEpoch: 6 ... endTxnMarker: ABORT coordinatorEpoch: 0
    offset: 2 ... producerId: 0 producerEpoch: 7 ... payload: thisIsMessageValue2
    offset: 3 ... producerId: 0 producerEpoch: 7 ... endTxnMarker: COMMIT coordinatorEpoch: 0

Changing transactional.id (the "wrong" pattern): two producer ids, epochs stay 0, no ABORT::

    offset: 0 ... producerId: 0 producerEpoch: 0 ... payload: thisIsMessageValue1
    offset: 1 ... producerId: 1 producerEpoch: 0 ... payload: thisIsMessageValue2
    offset: 2 ... producerId: 1 producerEpoch: 0 ... endTxnMarker: COMMIT coordinatorEpoch: 0

The seed's epochs start at 5 (a transactional id used before); on a fresh id they start at 0,
so the test checks the pattern e, e+1, e+2, e+2 rather than the literal numbers.

The seed shows transaction.version 1 (Kafka 3.x). At level 2 (Kafka 4's and minibroker's default)
the Java client commits with EndTxn v5, which bumps the epoch: the COMMIT marker carries e+3, and
in the changing-id pattern the COMMIT is at epoch 1. Both levels are checked.
"""

from __future__ import annotations

import re

import pytest

from .clients import create_topic
from .support import dump_log, project_broker
from .test_txn_support import (
    TXN_BROKER_ARGS,
    dump_entries,
    log_events,
    produce_sync,
    run_java_txn,
    txn_id,
    txn_producer,
)

V1 = "payload:thisIsMessageValue1"
V2 = "payload:thisIsMessageValue2"


@pytest.fixture(scope="module", params=[1, 2], ids=["tv1", "tv2"])
def txn_broker(request):
    b = project_broker(TXN_BROKER_ARGS + ["--transaction-version", str(request.param)],
                       name=f"test_txn_dumplog-tv{request.param}")
    b.level = request.param
    try:
        b.start()
        yield b
    finally:
        b.close()


def test_dump_log_fixed_transactional_id(txn_broker, topic):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, 1)
    tid = txn_id("anyValue")
    res = run_java_txn("dumplog", b.bootstrap_servers, topic, tid, tid)
    assert not res["errors"] and res["b_committed"], res
    entries = dump_entries(b, topic, 0)
    shape = [(off, what) for off, _, _, _, what in entries]
    assert shape == [(0, V1), (1, "ABORT"), (2, V2), (3, "COMMIT")], entries
    pids = {pid for _, pid, _, _, _ in entries}
    assert len(pids) == 1 and -1 not in pids, f"one producer id expected: {entries}"
    e = entries[0][2]
    commit = e + 2 if b.level < 2 else e + 3  # EndTxn v5 bumps as it commits
    assert [epoch for _, _, epoch, _, _ in entries] == [e, e + 1, e + 2, commit], entries
    assert all(txnl for _, _, _, txnl, _ in entries), f"every batch is transactional: {entries}"
    init = [x for x in log_events(b, "txn.producer_initialized") if x.get("transactional_id") == tid]
    assert [x["epoch"] for x in init] == [str(e), str(e + 2)], [x["_line"] for x in init]


def test_dump_log_changing_transactional_id(txn_broker, topic):
    b = txn_broker
    create_topic(b.bootstrap_servers, topic, 1)
    res = run_java_txn("dumplog", b.bootstrap_servers, topic, txn_id("anyValue"), txn_id("differentValue"))
    assert not res["errors"] and res["b_committed"], res
    entries = dump_entries(b, topic, 0)
    shape = [(off, what) for off, _, _, _, what in entries]
    assert shape == [(0, V1), (1, V2), (2, "COMMIT")], entries
    (_, pid_a, epoch_a, _, _), (_, pid_b, epoch_b, _, _), (_, pid_c, epoch_c, _, _) = entries
    assert pid_a != pid_b and pid_c == pid_b, f"value1 by producer A, value2 and COMMIT by B: {entries}"
    assert (epoch_a, epoch_b) == (0, 0), f"epochs are not incremented: {entries}"
    assert epoch_c == (0 if b.level < 2 else 1), f"the COMMIT marker's epoch at level {b.level}: {entries}"
    assert "ABORT" not in [what for *_, what in entries]


PLAN = ["commit", "abort", "commit", "abort"]
PER_TXN = 40
SPAN = PER_TXN + 1  # records + marker
_TXN_ENTRY = re.compile(r"^version: 0 producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) "
                        r"lastStableOffset: (\d+)$")


def test_dump_log_of_a_partition_written_by_librdkafka(broker_factory, topic):
    """Transactions from a real client over several 16 KiB segments, the broker stopped
    cleanly, then ``dump-log DIR``: every file kind is dumped, every check passes, the
    .txnindex lists exactly the aborted transactions and the snapshot the producer."""
    b = broker_factory(["--num-partitions", "1", "--segment-bytes", str(16 * 1024)])
    create_topic(b.bootstrap_servers, topic, 1)
    p = txn_producer(b.bootstrap_servers, txn_id("dumpdir"), **{"batch.size": 4000})
    p.init_transactions(20)
    for k, outcome in enumerate(PLAN):
        p.begin_transaction()
        acked = produce_sync(p, topic, [(0, f"t{k}-{i}|".encode() + b"d" * 500) for i in range(PER_TXN)])
        assert sorted(o for _, o in acked.values()) == list(range(k * SPAN, k * SPAN + PER_TXN))
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(20)
    p.flush(5)
    assert b.stop() == 0
    directory = b.data_dir / f"{topic}-0"
    r = dump_log(directory, timeout=60)
    assert r.returncode == 0 and r.stderr == "", f"exit {r.returncode}\n{r.stderr[-3000:]}"
    lines = r.stdout.splitlines()
    kinds = [line.rsplit(".", 1)[1] for line in lines if line.startswith("Dumping ")]
    assert kinds.count("log") >= 3, f"the data should span several segments: {kinds}"
    assert {"log", "index", "timeindex", "txnindex", "snapshot"} <= set(kinds), kinds
    assert not [line for line in lines if line.startswith("Found ")], "clean stop: no tail left"
    assert "isvalid: false" not in r.stdout
    assert any(line.startswith("offset: ") for line in lines), "16 KiB segments hold index entries"
    pids = {int(m[1]) for m in re.finditer(r"producerId: (\d+) producerEpoch", r.stdout)}
    assert len(pids) == 1, pids
    pid = pids.pop()
    entries = [tuple(map(int, m.groups())) for m in map(_TXN_ENTRY.match, lines) if m]
    assert entries == [(pid, k * SPAN, k * SPAN + PER_TXN, k * SPAN + PER_TXN + 1)
                       for k, o in enumerate(PLAN) if o == "abort"], entries
    last_snapshot = lines[max(i for i, line in enumerate(lines) if line.endswith(".snapshot")) + 1]
    assert last_snapshot.startswith(f"producerId: {pid} producerEpoch: "), last_snapshot
    assert "currentTxnFirstOffset: -1 " in last_snapshot, last_snapshot
    assert f"lastOffset: {3 * SPAN + PER_TXN - 1} " in last_snapshot, last_snapshot
