"""confluent-kafka (librdkafka) against a real broker: acks=all, mixed sizes, every codec."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from . import wire
from .clients import (
    check_contiguous,
    check_readback,
    consume_assigned,
    create_topic,
    index_of,
    produce_confluent,
)

PARTITIONS = 4
# 100,000 messages per codec (about 80 MB before compression): a few seconds each on two
# cores. MINIBROKER_TEST_MESSAGES overrides the count.
COUNTS = {codec: 100_000 for codec in ("none", "gzip", "snappy", "lz4", "zstd")}


@pytest.mark.parametrize("codec", list(COUNTS))
def test_produce_acks_all_then_read_back(broker, topic, codec):
    n = int(os.environ.get("MINIBROKER_TEST_MESSAGES", COUNTS[codec]))
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)

    t0 = time.monotonic()
    acked, errors = produce_confluent(broker.bootstrap_servers, topic, range(n), codec=codec, tag=codec)
    t_produce = time.monotonic() - t0
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:5]}"
    assert len(acked) == n, f"{len(acked)} distinct (partition, offset) pairs for {n} messages"

    per_partition = Counter(p for p, _ in acked)
    assert set(per_partition) == set(range(PARTITIONS)), f"messages per partition: {per_partition}"
    ends = wire.high_watermarks(broker.port, topic, range(PARTITIONS))
    assert ends == {p: per_partition[p] for p in range(PARTITIONS)}, (
        f"high watermarks {ends} != acknowledged per partition {dict(per_partition)}")
    for p in range(PARTITIONS):
        offsets = sorted(o for q, o in acked if q == p)
        assert offsets == list(range(per_partition[p])), f"partition {p}: acknowledged offsets have gaps"

    t1 = time.monotonic()
    records, errors = consume_assigned(broker, topic, range(PARTITIONS), ends=ends)
    t_consume = time.monotonic() - t1
    assert not errors, errors[:5]
    check_contiguous(records, ends)
    check_readback(records, acked, tag=codec)
    print(f"{codec}: {n} messages, produce {t_produce:.1f} s, consume {t_consume:.1f} s")


@pytest.mark.parametrize("acks", ["0", "1"])
def test_acks_0_and_1(broker, topic, acks):
    n = 5000
    create_topic(broker.bootstrap_servers, topic, 2)
    acked, errors = produce_confluent(broker.bootstrap_servers, topic, range(n), extra={"acks": acks}, timeout=60)
    assert not errors, errors[:5]
    assert len(acked) == n if acks == "1" else len(acked) >= 1  # acks=0 reports offset -1
    ends = wire.high_watermarks(broker.port, topic, range(2))
    assert sum(ends.values()) == n, f"high watermarks {ends} after {n} messages with acks={acks}"
    records, errors = consume_assigned(broker, topic, range(2), ends=ends)
    assert not errors, errors[:5]
    check_contiguous(records, ends)
    got = sorted(index_of(v) for recs in records.values() for _, _, v in recs)
    assert got == list(range(n))
    if acks == "1":
        check_readback(records, acked)


def test_auto_create_on_produce(broker, topic):
    from confluent_kafka.admin import AdminClient

    # Producing to an unknown topic auto-creates it with --num-partitions (4 here).
    acked, errors = produce_confluent(broker.bootstrap_servers, topic, range(100), timeout=60)
    assert not errors and len(acked) == 100
    md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(topic=topic, timeout=10)
    assert len(md.topics[topic].partitions) == 4
    assert {p.leader for p in md.topics[topic].partitions.values()} == {1}


def test_list_all_topics(broker, topic):
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap_servers, topic, 2)
    md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    assert len(md.brokers) == 1
    (b,) = md.brokers.values()
    assert (b.id, b.host, b.port) == (1, "127.0.0.1", broker.port)
    assert len(md.topics[topic].partitions) == 2
