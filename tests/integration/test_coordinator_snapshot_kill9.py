"""Coordinator snapshots survive kill -9 (issue 13, defect 5): a periodic snapshot, more
transactions and offset commits after it, then SIGKILL. The restart loads the snapshot,
replays only the log after it, and every committed record and offset is there; the same
transactional id carries on with a new instance."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from .clients import create_topic
from .test_txn_support import (
    READ_COMMITTED,
    TXN_BROKER_ARGS,
    log_events,
    produce_sync,
    read_all,
    txn_id,
    txn_producer,
    wait_for_event,
)


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        c.close()


def transactions(p, bootstrap, topic, group, tag, count, commit=True, first_offset=1000):
    """``count`` transactions of 2 records each, committing offsets first_offset, +2, ..."""
    values = []
    meta = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        for i in range(count):
            p.begin_transaction()
            batch = [(0, f"{tag}{i}|{k}".encode()) for k in range(2)]
            produce_sync(p, topic, batch)
            p.send_offsets_to_transaction([TopicPartition(topic, 0, first_offset + 2 * i)],
                                          meta.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
                values.extend(v for _, v in batch)
            else:
                p.abort_transaction(30)
    finally:
        meta.close()
    return values


def test_kill9_after_a_periodic_snapshot(broker_factory, topic):
    b = broker_factory(TXN_BROKER_ARGS, snapshot_records=6)
    create_topic(b.bootstrap_servers, topic, 1)
    group = f"g-{topic}"
    tid = txn_id("snapkill")
    p = txn_producer(b.bootstrap_servers, tid)
    p.init_transactions(30)
    committed_values = transactions(p, b.bootstrap_servers, topic, group, "a", 4)
    wait_for_event(b, "txn.snapshot_written", timeout=15, reason="periodic")
    wait_for_event(b, "group.snapshot_written", timeout=15, reason="periodic")
    # history after the snapshot: more commits (the offsets move on) and an abort
    committed_values += transactions(p, b.bootstrap_servers, topic, group, "b", 3, first_offset=2000)
    transactions(p, b.bootstrap_servers, topic, group, "x", 1, commit=False, first_offset=3000)
    last_offset = 2004  # the last committed transaction's
    assert committed(b.bootstrap_servers, group, topic) == last_offset
    b.kill9()
    del p

    b.start()
    [loaded] = log_events(b, "txn.coordinator_loaded")[-1:]
    assert log_events(b, "txn.snapshot_loaded"), b.log_tail(40)
    assert int(loaded["replayed_from"]) > 0 and int(loaded["records"]) > 0, loaded
    assert committed(b.bootstrap_servers, group, topic) == last_offset
    got = read_all(b, topic, [0], READ_COMMITTED)
    assert sorted(v for _, _, v in got[0]) == sorted(committed_values)

    p = txn_producer(b.bootstrap_servers, tid)
    p.init_transactions(30)
    more = transactions(p, b.bootstrap_servers, topic, group, "c", 1, first_offset=4000)
    got = read_all(b, topic, [0], READ_COMMITTED)
    assert sorted(v for _, _, v in got[0]) == sorted(committed_values + more)
    assert committed(b.bootstrap_servers, group, topic) == 4000
