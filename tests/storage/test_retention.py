import os

import pytest

from minibroker_storage import LogConfig, OffsetOutOfRange

from .batches import TS0, base_offset_of, make_batch, split_batches

DAY = 86_400_000


def test_retention_by_time(open_log):
    log = open_log(LogConfig(segment_bytes=4096, retention_ms=DAY))
    # Ten segments, each holding one day's batches.
    for day in range(10):
        for i in range(3):
            log.append(make_batch(1, 1000, timestamp=TS0 + day * DAY + i))
        log.roll()
    log.append(make_batch(1, 10, timestamp=TS0 + 10 * DAY))
    segments = log.segments
    assert len(segments) == 11
    assert log.apply_retention(TS0 + DAY) == 0
    now = TS0 + 5 * DAY + 2  # days 0..3 are past a day old; day 4's newest is exactly a day old
    assert log.apply_retention(now) == 4
    assert log.log_start_offset == 12
    assert [s.base_offset for s in log.segments][0] == 12
    for seg in segments[:4]:
        assert not os.path.exists(seg.path)
        assert not os.path.exists(seg.index.path)
        assert not os.path.exists(seg.time_index.path)
    with pytest.raises(OffsetOutOfRange):
        log.read(11, 100)
    assert base_offset_of(split_batches(log.read(12, 100))[0]) == 12
    # Never the active segment, however old.
    assert log.apply_retention(TS0 + 100 * DAY) == 6
    assert len(log.segments) == 1
    assert log.log_start_offset == 30
    assert log.log_end_offset == 31


def test_retention_forever(open_log):
    log = open_log(LogConfig(segment_bytes=4096, retention_ms=-1))
    for _ in range(10):
        log.append(make_batch(1, 3000, timestamp=TS0))
    assert log.apply_retention(TS0 + 1000 * DAY) == 0


def test_retention_without_timestamps_uses_file_time(open_log):
    log = open_log(LogConfig(segment_bytes=4096, retention_ms=DAY))
    for _ in range(3):
        log.append(make_batch(1, 3000, timestamp=-1))
    old = log.segments[0]
    os.utime(old.path, ns=((TS0 - 2 * DAY) * 10**6,) * 2)
    assert log.apply_retention(TS0) == 1
    assert log.log_start_offset == 1


def test_retention_by_bytes(open_log):
    log = open_log(LogConfig(segment_bytes=4096, retention_bytes=10_000, retention_ms=-1))
    batch = make_batch(1, 1900)  # two per segment
    for _ in range(20):
        log.append(batch)
    sizes = [s.size for s in log.segments]
    assert len(sizes) == 10 and log.size_bytes == sum(sizes)
    deleted = log.apply_retention(TS0)
    # Kafka's rule: delete oldest segments while the log stays at or above the limit without them.
    remaining = sum(sizes)
    expected = 0
    for size in sizes[:-1]:
        if remaining - size >= 10_000:
            remaining -= size
            expected += 1
        else:
            break
    assert deleted == expected > 0
    assert log.size_bytes == remaining
    assert log.log_start_offset == 2 * expected
    assert log.apply_retention(TS0) == 0


def test_retention_survives_reopen(open_log):
    log = open_log(LogConfig(segment_bytes=4096, retention_bytes=0))
    for _ in range(10):
        log.append(make_batch(1, 3000))
    log.apply_retention(TS0)
    start = log.log_start_offset
    assert start == 9
    log.close()
    log = open_log(LogConfig(segment_bytes=4096, retention_bytes=0))
    assert (log.log_start_offset, log.log_end_offset) == (start, 10)
