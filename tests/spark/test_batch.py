"""Batch reads with Spark: read_committed / read_uncommitted against a topic holding
committed, aborted and open transactions, and the offline read of the same data dir."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.integration.clients import create_topic, unique_topic

from .producers import write_txn_mix

KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


@pytest.fixture(scope="module")
def mix(broker):
    topic = unique_topic("mix")
    create_topic(broker.bootstrap_servers, topic, 2)
    m = write_txn_mix(broker.bootstrap_servers, topic, 2)
    yield m
    m.close_open()


def _online(spark, broker, topic, **options):
    r = (spark.read.format("minibroker").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("subscribe", topic))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _offline(spark, broker, topic, **options):
    r = spark.read.format("minibroker").option("path", str(broker.data_dir)).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _by_offset(rows) -> dict:
    out = {(r.partition, r.offset): r for r in rows}
    assert len(out) == len(rows), "a record was returned twice"
    return out


def test_read_committed_returns_exactly_the_committed_records(spark, broker, mix):
    df = _online(spark, broker, mix.topic)
    assert df.columns == KAFKA_COLUMNS
    rows = _by_offset(df.collect())
    expected = mix.read_committed()
    assert {k: (r.key, r.value) for k, r in rows.items()} == {k: (r[0], r[1]) for k, r in expected.items()}
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    sample = next(iter(rows.values()))
    assert sample.topic == mix.topic and sample.timestampType == 0
    assert abs((now - sample.timestamp).total_seconds()) < 600


def test_read_uncommitted_returns_every_data_record_never_a_control_record(spark, broker, mix):
    df = _online(spark, broker, mix.topic, **{"isolation.level": "read_uncommitted", "includeHeaders": "true"})
    assert df.columns == KAFKA_COLUMNS + ["headers"]
    rows = _by_offset(df.collect())
    # Exactly the delivered data records: markers occupy the other offsets below the end.
    assert set(rows) == set(mix.records)
    for key, (k, v, headers, _fate) in mix.records.items():
        row = rows[key]
        assert (row.key, row.value) == (k, v)
        assert [(h.key, h.value) for h in row.headers] == [(hk, hv) for hk, hv in headers]
    hw = {p: max(o for (q, o) in mix.records if q == p) + 1 for p in range(mix.partitions)}
    markers = [(p, o) for p in hw for o in range(hw[p]) if (p, o) not in mix.records]
    assert markers, "the workload wrote transaction markers"
    assert not set(markers) & set(rows)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_offline_read_equals_online_read(spark, broker, mix, isolation):
    opts = {"isolation.level": isolation, "includeHeaders": "true"}
    online = _online(spark, broker, mix.topic, **opts).collect()
    offline = _offline(spark, broker, mix.topic, **opts).collect()
    assert len(online) == len(mix.read_committed() if isolation == "read_committed" else mix.records)

    def key(r):
        return (r.partition, r.offset)

    assert sorted(online, key=key) == sorted(offline, key=key)


def test_offsets_json_and_split_partitions(spark, broker, mix):
    t = mix.topic
    df = _online(spark, broker, t, startingOffsets=f'{{"{t}":{{"0":10,"1":-2}}}}',
                 endingOffsets=f'{{"{t}":{{"0":50,"1":-1}}}}', maxRecordsPerPartition="7",
                 **{"isolation.level": "read_uncommitted"})
    # 40 offsets of partition 0 in pieces of <= 7, and partition 1 up to its end likewise.
    assert df.rdd.getNumPartitions() >= 40 // 7 + 1
    got = set(_by_offset(df.collect()))
    hw1 = max(o for (p, o) in mix.records if p == 1) + 1
    want = {(p, o) for (p, o) in mix.records if (p == 0 and 10 <= o < 50) or (p == 1 and o < hw1)}
    assert got == want


def test_offline_stream_available_now_equals_batch(spark, broker, mix, tmp_path):
    """readStream over a data directory (the broker still running on it), in small
    micro-batches with Trigger.AvailableNow: the same records as the batch read."""
    stream = (spark.readStream.format("minibroker").option("path", str(broker.data_dir))
              .option("subscribe", mix.topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "60").load())
    query = (stream.selectExpr("partition", "offset", "value").writeStream.format("parquet")
             .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the AvailableNow query did not finish"
    assert query.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = {(r.partition, r.offset): r.value for r in rows}
    assert len(got) == len(rows)
    assert got == {k: r[1] for k, r in mix.read_committed().items()}
    assert len(query.recentProgress) >= 4  # several micro-batches, not one
