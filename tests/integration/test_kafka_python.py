"""kafka-python: KafkaProducer send (acks=all) + KafkaConsumer by assignment (group_id=None)."""

from __future__ import annotations

import time

import pytest

from . import wire
from .clients import create_topic, make_key, make_value

N = 3000
PARTITIONS = 2


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python_produce_consume(broker, topic, compression):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    tag = f"kp-{compression}"
    # Idempotence (InitProducerId) is a later issue; kafka-python 3 turns it on by default.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=5,
                             enable_idempotence=False,
                             compression_type=compression, request_timeout_ms=30000,
                             max_block_ms=30000)
    try:
        futures = [(i, producer.send(topic, key=make_key(i) or b"", value=make_value(i, tag),
                                     partition=i % PARTITIONS))
                   for i in range(N)]
        producer.flush(timeout=120)
        acked = {}
        for i, f in futures:
            md = f.get(timeout=30)
            acked[(md.partition, md.offset)] = i
    finally:
        producer.close(timeout=10)
    assert len(acked) == N

    ends = wire.high_watermarks(broker.port, topic, range(PARTITIONS))
    assert ends == {0: N // 2, 1: N // 2}, ends

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=30000)
    got: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 120
        for _ in range(10_000):
            if sum(map(len, got.values())) >= N or time.monotonic() > deadline:
                break
            for tp, msgs in consumer.poll(timeout_ms=500, max_records=2000).items():
                got[tp.partition].extend((m.offset, m.key, m.value) for m in msgs)
    finally:
        consumer.close()

    for p, recs in got.items():
        assert [o for o, _, _ in recs] == list(range(ends[p])), f"partition {p}: offsets not 0..{ends[p] - 1}"
        for off, key, value in recs:
            i = acked[(p, off)]
            assert key == (make_key(i) or b""), (p, off, key)
            assert value == make_value(i, tag), (p, off, value[:40])


def test_kafka_python_default_config(broker, topic):
    # kafka-python 3 enables idempotence by default: InitProducerId + sequenced batches.
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=10000, request_timeout_ms=10000)
    try:
        md = producer.send(topic, key=b"k", value=b"v").get(timeout=20)
        assert md.offset == 0
    finally:
        producer.close(timeout=5)
