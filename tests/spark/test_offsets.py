"""Offset planning and option parsing, without Spark or a broker."""

from __future__ import annotations

import pytest

from minibroker.spark.offsets import (
    OffsetRange,
    OffsetSpec,
    from_json_dict,
    parse_offset_spec,
    plan_ranges,
    rate_limit,
    resolve,
    split_ranges,
    to_json_dict,
)
from minibroker.spark.options import OptionError, parse_options

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_offset_json_round_trip_and_resolution():
    spec = parse_offset_spec('{"a":{"0":5,"1":-2},"b":{"0":-1}}', "startingOffsets")
    assert spec.kind == "json" and spec.offsets == {A0: 5, A1: -2, B0: -1}
    earliest, latest = {A0: 1, A1: 2, B0: 3}, {A0: 10, A1: 20, B0: 30}
    assert resolve(spec, [A0, A1, B0], earliest, latest, "startingOffsets") == {A0: 5, A1: 2, B0: 30}
    assert resolve(OffsetSpec("earliest"), [A0], earliest, latest, "startingOffsets") == {A0: 1}
    doc = to_json_dict({A1: 7, A0: 3})
    assert doc == {"a": {"0": 3, "1": 7}} and from_json_dict(doc) == {A0: 3, A1: 7}
    with pytest.raises(ValueError, match="not read"):
        resolve(spec, [A0], earliest, latest, "startingOffsets")
    with pytest.raises(ValueError):
        parse_offset_spec("{not json", "endingOffsets")


def test_rate_limit_shares_the_budget_by_backlog_exactly():
    start = {A0: 0, A1: 100, B0: 5}
    latest = {A0: 1000, A1: 110, B0: 5}
    end = rate_limit(start, latest, 101)
    assert sum(end[tp] - start[tp] for tp in start) == 101
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    assert end[B0] == 5
    assert rate_limit(start, latest, 10_000) == latest
    # Every trigger makes progress, even with a budget smaller than the partition count.
    assert sum(rate_limit({A0: 0, A1: 0}, {A0: 3, A1: 3}, 1).values()) == 1
    # A latest offset below the start (data loss) is kept, as in Spark's rateLimit, so the
    # planner sees the drop and reports it.
    assert rate_limit({A0: 50}, {A0: 40}, 10) == {A0: 40}
    assert rate_limit({A0: 50, A1: 0}, {A0: 40, A1: 100}, 10) == {A0: 40, A1: 10}


def test_split_ranges():
    ranges = plan_ranges({A0: 0, A1: 10, B0: 7}, {A0: 100, A1: 10, B0: 9})
    assert ranges == [OffsetRange("a", 0, 0, 100), OffsetRange("b", 0, 7, 9)]
    pieces = split_ranges(ranges, max_records=30)
    assert [(r.start, r.end) for r in pieces if r.topic == "a"] == [(0, 25), (25, 50), (50, 75), (75, 100)]
    halves = split_ranges(ranges, min_partitions=4)
    assert len(halves) >= 4 and sum(r.size for r in halves) == 102
    covered = sorted((r.start, r.end) for r in halves if r.topic == "a")
    assert covered[0][0] == 0 and covered[-1][1] == 100
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))


def test_options():
    o = parse_options({"kafka.bootstrap.servers": "h:1", "subscribe": "x, y", "kafka.client.id": "c"},
                      streaming=True)
    assert o.subscribe == ("x", "y") and o.read_committed and o.starting.kind == "latest"
    assert o.consumer_config()["client.id"] == "c"
    assert o.consumer_config()["isolation.level"] == "read_committed"
    o = parse_options({"path": "/d", "subscribePattern": "t.*", "isolation.level": "READ_UNCOMMITTED"},
                      streaming=False)
    assert o.offline and o.pattern == "t.*" and not o.read_committed and o.starting.kind == "earliest"
    for bad in ({"subscribe": "x"},
                {"path": "/d", "kafka.bootstrap.servers": "h:1", "subscribe": "x"},
                {"path": "/d"},
                {"path": "/d", "subscribe": "x", "assign": '{"x":[0]}'},
                {"path": "/d", "subscribe": "x", "isolation.level": "serializable"},
                {"path": "/d", "subscribe": "x", "isolation.level": "read_committed",
                 "kafka.isolation.level": "read_uncommitted"},
                {"path": "/d", "subscribe": "x", "startingOffsets": "latest"},
                {"path": "/d", "subscribe": "x", "kafka.enable.auto.commit": "true"},
                {"path": "/d", "subscribe": "x", "maxOffsetsPerTrigger": "0"},
                {"path": "/d", "subscribe": "x", "typo": "1"}):
        with pytest.raises(OptionError):
            parse_options(bad, streaming=False)


def test_subscribe_pattern_leaves_out_only_kafkas_internal_topics(tmp_path):
    """Spark lists topics with listInternal=false: __consumer_offsets and
    __transaction_state are left out, a user topic named __audit is not."""
    from minibroker.spark.logdir import LogDirPlanner

    for name in ("__consumer_offsets-0", "__transaction_state-0", "__audit-0", "events-0"):
        (tmp_path / name).mkdir()
    planner = LogDirPlanner(str(tmp_path), True, pattern=".*")
    assert planner.partitions() == [("__audit", 0), ("events", 0)]
    assert parse_options({"path": "/d", "subscribe": "x", "isolation.level": "read_uncommitted",
                          "kafka.isolation.level": "READ_UNCOMMITTED"}, streaming=False).isolation_level \
        == "read_uncommitted"
