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
    create_topic(broker.bootstrap_servers, t, 1)
    _produce(broker.bootstrap_servers, t, 100)
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
    _produce(broker.bootstrap_servers, topic, 20)
    r.prepareForTriggerAvailableNow()
    _produce(broker.bootstrap_servers, topic, 5)  # after the AvailableNow target: not read
    end1 = r.latestOffset(end0, ReadMaxRows(15))
    assert end1 == {topic: {"0": 115}}
    end2 = r.latestOffset(end1, ReadMaxRows(15))
    assert end2 == {topic: {"0": 120}}
    assert r.latestOffset(end2, ReadMaxRows(15)) is end2
    assert _ranges(r.partitions(end1, end2)) == [(115, 120)]
    assert r.reportLatestOffset() == {topic: {"0": 125}}
    replay = _reader(broker, topic)
    assert replay.partitions(replay.initialOffset(), end0) == []


class _FakePlanner:
    """Partitions and watermarks the test sets, for offset planning without a broker."""

    def __init__(self, marks):
        self.marks = dict(marks)

    def partitions(self):
        return sorted(self.marks)

    def watermarks(self, tps):
        return {tp: self.marks[tp] for tp in tps}

    def aborted_for(self, r):
        return ()

    def close(self):
        pass


def _fake_reader(planner, **opts):
    r = StreamReader(parse_options({"path": "/nonexistent", "subscribePattern": "ev-.*",
                                    "startingOffsets": "earliest", **opts}, streaming=True))
    r._planner = planner
    return r


def test_replay_of_the_first_batch_after_a_partition_appeared():
    from minibroker.spark.offsets import Watermarks

    planner = _FakePlanner({("ev-a", 0): Watermarks(0, 10)})
    r = _fake_reader(planner)
    init = r.initialOffset()
    end0 = r.latestOffset(init, ReadAllAvailable())
    assert end0 == {"ev-a": {"0": 10}, "@start": {"ev-a": {"0": 0}}}
    # A new topic appears; the query dies before batch 0 commits and replays it with
    # initialOffset() asked again, which now names the new partition too.
    planner.marks[("ev-b", 0)] = Watermarks(0, 5)
    r2 = _fake_reader(planner)
    init2 = r2.initialOffset()
    assert init2 == {"ev-a": {"0": -2}, "ev-b": {"0": -2}}
    assert _ranges(r2.partitions(init2, end0)) == [(0, 10)]
    # The new partition joins in the next batch, from its start.
    end1 = r2.latestOffset(end0, ReadAllAvailable())
    assert end1 == {"ev-a": {"0": 10}, "ev-b": {"0": 0}}
    end2 = r2.latestOffset(end1, ReadAllAvailable())
    assert [(p.range.topic, p.range.start, p.range.end) for p in r2.partitions(end1, end2)] == [("ev-b", 0, 5)]


@pytest.mark.parametrize("fail", [True, False])
def test_data_loss_between_batches_follows_fail_on_data_loss(fail):
    """Spark's checks (KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets): an
    offset that went backwards, a partition gone, a new partition starting above 0."""
    from minibroker.spark.offsets import DataLoss, Watermarks

    planner = _FakePlanner({("ev-a", 0): Watermarks(0, 10), ("ev-a", 1): Watermarks(0, 10)})
    r = _fake_reader(planner, failOnDataLoss=str(fail).lower())
    start = {"ev-a": {"0": 10, "1": 10}}
    assert r.latestOffset(start, ReadAllAvailable()) is start

    def plan(start, end):
        if fail:
            with pytest.raises(DataLoss, match="failOnDataLoss") as e:
                r.partitions(start, end)
            return str(e.value)
        return [(p.range.topic, p.range.partition, p.range.start, p.range.end) for p in r.partitions(start, end)]

    # ev-a recreated with 1 partition holding 4 records: offset 10 -> 4, partition 1 gone.
    planner.marks = {("ev-a", 0): Watermarks(0, 4)}
    end = r.latestOffset(start, ReadMaxRows(100))
    assert end == {"ev-a": {"0": 4}}
    got = plan(start, end)
    if fail:
        assert "changed from 10 to 4" in got or "are gone" in got
    else:
        assert got == []
        # The next batch goes on from the new offsets.
        planner.marks[("ev-a", 0)] = Watermarks(0, 7)
        end2 = r.latestOffset(end, ReadAllAvailable())
        assert plan(end, end2) == [("ev-a", 0, 4, 7)]
    # A new partition whose log starts above 0 (retention ran before the query saw it).
    planner.marks = {("ev-a", 0): Watermarks(0, 10), ("ev-c", 0): Watermarks(50, 60)}
    start = {"ev-a": {"0": 10}}
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"ev-a": {"0": 10}, "ev-c": {"0": 50}}
    got = plan(start, end)
    if fail:
        assert "starts from 50 instead of 0" in got
    else:
        assert got == []
