"""Offsets committed inside a transaction (librdkafka send_offsets_to_transaction).

While the transaction is open, OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
(AdminClient list_consumer_group_offsets(require_stable=True)), a plain fetch still sees the
old offsets, and a read_committed consumer of the group waits instead of starting from the
old ones. After an abort the committed offsets are the old ones and that consumer starts
there; after a commit they are the transaction's, and they survive a kill -9 of the broker.
"""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition

from .clients import create_topic
from .test_groups_clients import (
    cgmd_generation,
    committed_offsets,
    group_id,
    member_conf,
    produce_values,
    wait_until,
)
from .test_txn_support import TXN_BROKER_ARGS, txn_producer

BROKER_ARGS = TXN_BROKER_ARGS + ["--group-initial-rebalance-delay-ms", "0"]


def list_offsets(bootstrap: str, group: str, topic: str, partitions, require_stable: bool):
    """{partition: (offset, error code or None)} from AdminClient.list_consumer_group_offsets."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    res = admin.list_consumer_group_offsets([req], require_stable=require_stable,
                                            request_timeout=10)[group].result(timeout=15)
    return {tp.partition: (tp.offset, tp.error.code() if tp.error is not None else None)
            for tp in res.topic_partitions}


class StoredOffsetReader:
    """A read_committed consumer that assign()s the partitions at the group's committed offsets
    (librdkafka fetches them with require_stable) and records the first offset it gets."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions) -> None:
        from confluent_kafka import Consumer

        self.first: dict[int, int] = {}
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
        self.consumer.assign([TopicPartition(topic, p) for p in partitions])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + 60
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                m = self.consumer.poll(0.1)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(m.error()))
                    continue
                self.first.setdefault(m.partition(), m.offset())
        finally:
            self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join(20)


def test_require_stable_during_open_transaction_and_abort_keeps_old_offsets(broker_factory, topic):
    from confluent_kafka import Consumer

    b = broker_factory(BROKER_ARGS)
    parts = [0, 1]
    create_topic(b.bootstrap_servers, topic, len(parts))
    out_topic = f"{topic}-out"
    create_topic(b.bootstrap_servers, out_topic, 1)
    produce_values(b.bootstrap_servers, topic, {p: [f"in-{p}-{i}".encode() for i in range(30)] for p in parts})
    group = group_id("txn-offsets")

    # a group member reads the input and commits "old" offsets the plain way
    member = Consumer(member_conf(b.bootstrap_servers, group, **{"isolation.level": "read_committed"}))
    member.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 60 and time.monotonic() < deadline:
        seen += sum(1 for m in member.consume(100, 0.2) if m.error() is None)
    assert seen == 60
    member.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)], asynchronous=False)
    old = {0: (5, None), 1: (7, None)}
    assert list_offsets(b.bootstrap_servers, group, topic, parts, True) == old
    cgmd = member.consumer_group_metadata()
    assert cgmd_generation(cgmd) >= 1

    producer = txn_producer(b.bootstrap_servers, f"it-txn-offsets-{uuid.uuid4().hex[:8]}")
    producer.init_transactions(20)
    readers = []
    try:
        # transaction 1: offsets sent (KIP-447: with the member's generation), then aborted
        producer.begin_transaction()
        producer.produce(out_topic, value=b"out-1")
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 20), TopicPartition(topic, 1, 25)], cgmd, 20)
        assert list_offsets(b.bootstrap_servers, group, topic, parts, True) == {
            0: (-1001, KafkaError.UNSTABLE_OFFSET_COMMIT), 1: (-1001, KafkaError.UNSTABLE_OFFSET_COMMIT)}
        assert list_offsets(b.bootstrap_servers, group, topic, parts, False) == old
        reader = StoredOffsetReader(b.bootstrap_servers, group, topic, parts)
        readers.append(reader)
        time.sleep(1.5)
        assert reader.first == {}, f"read_committed consumer started before the transaction ended: {reader.first}"
        producer.abort_transaction(20)
        assert list_offsets(b.bootstrap_servers, group, topic, parts, True) == old
        assert list_offsets(b.bootstrap_servers, group, topic, parts, False) == old
        wait_until(lambda: len(reader.first) == 2, 20, "the reader to start after the abort")
        assert reader.first == {0: 5, 1: 7}, reader.first
        assert not reader.errors, reader.errors
        reader.close()

        # transaction 2: committed; the new offsets are visible, also to a new reader
        producer.begin_transaction()
        producer.produce(out_topic, value=b"out-2")
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 20), TopicPartition(topic, 1, 25)], member.consumer_group_metadata(), 20)
        assert list_offsets(b.bootstrap_servers, group, topic, parts, True)[0][1] == KafkaError.UNSTABLE_OFFSET_COMMIT
        producer.commit_transaction(20)
        new = {0: (20, None), 1: (25, None)}
        assert list_offsets(b.bootstrap_servers, group, topic, parts, True) == new
        reader = StoredOffsetReader(b.bootstrap_servers, group, topic, parts)
        readers.append(reader)
        wait_until(lambda: len(reader.first) == 2, 20, "the reader to start at the new offsets")
        assert reader.first == {0: 20, 1: 25}
        reader.close()
    finally:
        for r in readers:
            r.close()
        producer.flush(5)
        member.close()

    # the transaction's offsets outlive a crash of the broker
    b.restart(graceful=False)
    assert committed_offsets(b.bootstrap_servers, group, topic, parts) == {0: 20, 1: 25}
