"""The stream reader's offsets without a running query: the first micro-batch replays
exactly after a crash, read limits, AvailableNow, and "nothing new" (offline source)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from minibroker.spark.options import parse_options
from minibroker.spark.source import StreamReader
from tests.integration.clients import create_topic, unique_topic


def _produce(bootstrap, topic, n):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0


@pytest.fixture
def topic(broker):
    t = unique_topic("reader")
    create_topic(broker.bootstrap, t, 1)
    _produce(broker.bootstrap, t, 100)
    return t


def _reader(broker, topic, **opts):
    return StreamReader(parse_options({"path": str(broker.data_dir), "subscribe": topic, **opts},
                                      streaming=True))


def _ranges(parts):
    return [(p.range.start, p.range.end) for p in parts]


def test_first_batch_replays_with_the_start_it_resolved(broker, topic):
    r = _reader(broker, topic, startingOffsets="earliest")
    init = r.initialOffset()
    assert init == {topic: {"0": -2}}
    end0 = r.latestOffset(init, ReadMaxRows(30))
    assert end0 == {topic: {"0": 30}, "@start": {topic: {"0": 0}}}
    assert _ranges(r.partitions(init, end0)) == [(0, 30)]
    # The query dies before batch 0 commits; Spark restarts it with initialOffset() again
    # and the end it wrote to its offset log: the same range.
    r2 = _reader(broker, topic, startingOffsets="earliest")
    assert _ranges(r2.partitions(r2.initialOffset(), end0)) == [(0, 30)]
    end1 = r2.latestOffset(end0, ReadMaxRows(30))
    assert end1 == {topic: {"0": 60}}
    assert _ranges(r2.partitions(end0, end1)) == [(30, 60)]
    end2 = r2.latestOffset(end1, ReadAllAvailable())
    assert end2 == {topic: {"0": 100}}
    assert r2.latestOffset(end2, ReadAllAvailable()) is end2  # nothing new


def test_latest_start_and_available_now(broker, topic):
    r = _reader(broker, topic)  # startingOffsets defaults to latest for streams
    init = r.initialOffset()
    end0 = r.latestOffset(init, ReadAllAvailable())
    assert end0 == {topic: {"0": 100}, "@start": {topic: {"0": 100}}}
    assert r.partitions(init, end0) == []
    _produce(broker.bootstrap, topic, 20)
    r.prepareForTriggerAvailableNow()
    _produce(broker.bootstrap, topic, 5)  # after the AvailableNow target: not read
    end1 = r.latestOffset(end0, ReadMaxRows(15))
    assert end1 == {topic: {"0": 115}}
    end2 = r.latestOffset(end1, ReadMaxRows(15))
    assert end2 == {topic: {"0": 120}}
    assert r.latestOffset(end2, ReadMaxRows(15)) is end2
    assert _ranges(r.partitions(end1, end2)) == [(115, 120)]
    assert r.reportLatestOffset() == {topic: {"0": 125}}
    replay = _reader(broker, topic)
    assert replay.partitions(replay.initialOffset(), end0) == []
