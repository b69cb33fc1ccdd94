"""Log compaction with real clients (confluent-kafka): a compacted topic written by an idempotent
producer and by transactions, and the internal topics of a consume-transform-produce
application, each cleaned by the broker's cleaner while it serves them.

What must hold after cleaning, after a clean restart and after a kill -9: consumers of either
isolation level read the latest committed value of every live key, no aborted record and no
deleted key; the application's committed group offsets and its transactional id (now fenced
by a new instance) come back from the compacted ``__consumer_offsets`` and
``__transaction_state`` alone, with the coordinator snapshots removed.
"""

from __future__ import annotations

import os
import time

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker_storage.segment_files import segments, walk_segment

from .test_txn_support import READ_COMMITTED, READ_UNCOMMITTED, consumer

CLEANER = {"log_cleaner_backoff_ms": 100}
COMPACT = {"cleanup.policy": "compact", "segment.ms": "400", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "300"}


def read_partition(bootstrap: str, topic: str, isolation: str, timeout: float = 20.0):
    """(offset, key, value) of every record of partition 0 up to its end."""
    c = consumer(bootstrap, isolation)
    out = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    raise AssertionError(f"{topic}: no end of partition within {timeout} s ({len(out)} records)")


def stored_records(data_dir, topic: str) -> int:
    """Data records in a partition's segment files (what a restart replays without snapshots).
    Markers are not counted: a committed transaction's marker stays delete.retention.ms
    (24 h on the internal topics) after its records went, as in Kafka."""
    n = 0
    for seg in segments(os.path.join(data_dir, f"{topic}-0")):
        n += sum(h.record_count for h, _ in walk_segment(seg, check_crc=False, position=0)
                 if not h.is_control)
    return n


def cleaned_to(data_dir, topic: str) -> int:
    """Where the cleaner's last round on partition 0 ended (its checkpoint file), -1 before one."""
    from minibroker_storage import start_offsets
    from minibroker_storage.cleaner import CHECKPOINT_FILE

    return start_offsets.load(data_dir, CHECKPOINT_FILE).get((topic, 0), -1)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


def test_a_compacted_topic_keeps_the_latest_committed_value_of_each_key(broker_factory, topic):
    b = broker_factory(**CLEANER)
    boot = b.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=COMPACT)])[topic].result(15)
    idem = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 20})
    txp = Producer({"bootstrap.servers": boot, "transactional.id": f"{topic}-t", "linger.ms": 20})
    txp.init_transactions(30)
    expected: dict[bytes, bytes | None] = {}
    for round_ in range(6):
        for k in range(40):
            key, value = b"key-%d" % k, b"v%d-%d" % (round_, k)
            idem.produce(topic, key=key, value=value, partition=0)
            expected[key] = value
        assert idem.flush(15) == 0
        txp.begin_transaction()
        for k in range(0, 40, 4):
            txp.produce(topic, key=b"key-%d" % k, value=b"aborted-%d" % round_, partition=0)
        txp.abort_transaction(30)
        txp.begin_transaction()
        for k in range(1, 40, 4):
            key = b"key-%d" % k
            txp.produce(topic, key=key, value=b"committed-%d" % round_, partition=0)
            expected[key] = b"committed-%d" % round_
        txp.commit_transaction(30)
        time.sleep(0.45)  # the next write rolls the segment: the cleaner gets work
    for k in range(30, 40):  # tombstones
        idem.produce(topic, key=b"key-%d" % k, value=None, partition=0)
        expected[b"key-%d" % k] = None
    assert idem.flush(15) == 0
    written = 6 * 60 + 10  # records, besides the 12 markers
    live = {k: v for k, v in expected.items() if v is not None}

    def latest_only(isolation=READ_COMMITTED):
        records = read_partition(boot, topic, isolation)
        return {k: v for _o, k, v in records if v is not None} == live and len(records) <= len(expected)

    acked: list = []
    # two rounds more (each after a roll): the first gives the tombstones their delete horizon,
    # the one after it removes them
    for n in range(3):
        time.sleep(0.45)
        idem.produce(topic, key=b"roll-%d" % n, value=b"r", partition=0, on_delivery=lambda _e, m: acked.append(m))
        assert idem.flush(15) == 0
        live[b"roll-%d" % n] = b"r"
        rolled_at = acked[-1].offset()
        _wait(lambda at=rolled_at: cleaned_to(b.data_dir, topic) >= at, 20, f"a round after roll {n}")
    _wait(latest_only, 20, "only the latest value of each live key is left")
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        records = read_partition(boot, topic, isolation)
        assert {k: v for _o, k, v in records} == live, isolation
        assert [o for o, _k, _v in records] == sorted(o for o, _k, _v in records)
    after_clean = read_partition(boot, topic, READ_COMMITTED)
    assert stored_records(b.data_dir, topic) < written / 4

    b.restart()
    assert read_partition(boot, topic, READ_COMMITTED) == after_clean
    b.kill9()
    b.start()
    assert read_partition(boot, topic, READ_UNCOMMITTED) == after_clean
    # the idempotent producer's state survived on the kept (empty) batches: it goes on
    idem2 = Producer({"bootstrap.servers": boot, "enable.idempotence": True})
    idem2.produce(topic, key=b"key-0", value=b"after", partition=0)
    assert idem2.flush(15) == 0


def test_internal_topics_are_compacted_and_replayed_without_snapshots(broker_factory, topic):
    b = broker_factory(**CLEANER, offsets_topic_segment_bytes=2048,
                       transaction_state_log_segment_bytes=2048)
    boot = b.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": boot})
    out_topic = f"{topic}-out"
    admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)
                         for t in (topic, out_topic)])[out_topic].result(15)
    seed = Producer({"bootstrap.servers": boot})
    for i in range(150):
        seed.produce(topic, value=b"in-%d" % i, partition=0)
    assert seed.flush(15) == 0

    group, txn_id = f"{topic}-g", f"{topic}-app"
    src = consumer(boot, READ_COMMITTED, **{"group.id": group})
    src.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    app = Producer({"bootstrap.servers": boot, "transactional.id": txn_id})
    app.init_transactions(30)
    copied = 0
    deadline = time.monotonic() + 60
    while copied < 150 and time.monotonic() < deadline:
        m = src.poll(0.2)
        if m is None or m.error() is not None:
            continue
        app.begin_transaction()  # one transaction per record: a long coordinator history
        app.produce(out_topic, value=m.value(), partition=0)
        app.send_offsets_to_transaction([TopicPartition(topic, 0, m.offset() + 1)],
                                        src.consumer_group_metadata(), 30)
        app.commit_transaction(30)
        copied += 1
    src.close()
    assert copied == 150
    # a second group that is then deleted: its tombstones must keep it deleted
    gone = f"{topic}-gone"
    c2 = consumer(boot, READ_COMMITTED, **{"group.id": gone})
    c2.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    c2.close()
    admin.delete_consumer_groups([gone])[gone].result(15)

    # written: Ongoing, PrepareCommit, CompleteCommit per transaction (and the first Empty);
    # an offset commit per transaction, and the deleted group's commit and tombstones
    written = {"__transaction_state": 3 * 150 + 1, "__consumer_offsets": 150 + 3}
    _wait(lambda: all(stored_records(b.data_dir, t) < n / 4 for t, n in written.items()), 30,
          f"internal topics compacted from {written}")

    b.stop()
    for name in ("transaction-coordinator.snapshot", "group-coordinator.snapshot"):
        path = os.path.join(b.data_dir, name)
        if os.path.exists(path):
            os.unlink(path)
    b.start()
    admin = AdminClient({"bootstrap.servers": boot})
    committed = consumer(boot, READ_COMMITTED, **{"group.id": group}).committed(
        [TopicPartition(topic, 0)], timeout=15)
    assert committed[0].offset == 150
    listed = {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    assert group in listed and gone not in listed
    # the transactional id came back too: a new instance fences the old one
    app2 = Producer({"bootstrap.servers": boot, "transactional.id": txn_id})
    app2.init_transactions(30)
    try:
        app.begin_transaction()
        app.produce(out_topic, value=b"zombie", partition=0)
        app.commit_transaction(10)
        raise AssertionError("the old instance was not fenced")
    except KafkaException as e:
        assert e.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                    KafkaError.INVALID_PRODUCER_EPOCH), e
    values = [v for _o, _k, v in read_partition(boot, out_topic, READ_COMMITTED)]
    assert values == [b"in-%d" % i for i in range(150)]
