import os

import pytest

from minibroker_protocol.batch import read_header
from minibroker_storage import (
    FlushPolicy,
    LogClosed,
    LogConfig,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    iter_file_batches,
)
from minibroker_storage.log import CLEAN_SHUTDOWN_FILE

from .batches import TS0, base_offset_of, make_batch, same_apart_from_offset, split_batches


def fill(log, n, count=3, value_size=100):
    sent = []
    for i in range(n):
        batch = make_batch(count, value_size, fill=i, timestamp=TS0 + i)
        sent.append((log.append(batch), batch))
    return sent


def test_empty_log(open_log):
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert len(log.read(0, 1000)) == 0
    assert log.size_bytes == 0
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 1000)


def test_append_assigns_offsets_and_read_round_trips(open_log):
    log = open_log()
    sent = fill(log, 20)
    assert [info.base_offset for info, _ in sent] == list(range(0, 60, 3))
    assert [info.last_offset for info, _ in sent] == list(range(2, 62, 3))
    assert all(info.log_append_time_ms == -1 for info, _ in sent)
    assert log.log_end_offset == log.high_watermark == 60
    stored = []
    offset = 0
    while offset < log.log_end_offset:
        for batch in split_batches(log.read(offset, 1 << 20)):
            stored.append(batch)
            offset = read_header(batch).next_offset
    assert len(stored) == len(sent)
    for batch, (info, original) in zip(stored, sent):
        assert base_offset_of(batch) == info.base_offset
        assert same_apart_from_offset(batch, original)


def test_append_accepts_memoryview_and_header(open_log):
    log = open_log()
    raw = bytearray(b"xx" + make_batch(5))
    view = memoryview(raw)[2:]
    header = read_header(view)
    info = log.append(view, header)
    assert (info.base_offset, info.last_offset, info.start_position) == (0, 4, 0)
    assert bytes(log.read(0, 1000)) == bytes(view)


def test_read_from_middle_of_batch_returns_whole_batch(open_log):
    log = open_log()
    fill(log, 3, count=5)
    batches = split_batches(log.read(7, 1 << 20))
    assert base_offset_of(batches[0]) == 5


def test_read_max_bytes_returns_whole_batches(open_log):
    log = open_log()
    sent = fill(log, 10)
    size = len(sent[0][1])
    assert len(split_batches(log.read(0, size * 3 + size // 2))) == 3
    assert len(split_batches(log.read(0, size * 3))) == 3
    assert len(split_batches(log.read(0, size * 3 - 1))) == 2


def test_read_min_one(open_log):
    log = open_log()
    big = make_batch(1, 2000)
    log.append(big)
    fill(log, 2)
    assert bytes(log.read(0, 100)) == big  # KIP-74: first batch whole
    assert len(log.read(0, 100, min_one=False)) == 0
    assert len(split_batches(log.read(0, len(big) + 10))) == 1


def test_read_upper_bound(open_log):
    log = open_log()
    fill(log, 10)  # batches at 0, 3, 6, ...
    assert [base_offset_of(b) for b in split_batches(log.read(0, 1 << 20, upper_bound=9))] == [0, 3, 6]
    # A batch straddling the bound (9..11) stays out whole, as in Kafka, where
    # the bound's offset metadata is the position of the batch holding it.
    assert [base_offset_of(b) for b in split_batches(log.read(0, 1 << 20, upper_bound=10))] == [0, 3, 6]
    assert [base_offset_of(b) for b in split_batches(log.read(0, 1 << 20, upper_bound=12))] == [0, 3, 6, 9]
    assert len(log.read(9, 1 << 20, upper_bound=9)) == 0
    assert len(log.read(10, 1 << 20, upper_bound=11)) == 0


def test_read_upper_bound_with_index_jump(open_log):
    log = open_log(LogConfig(segment_bytes=1 << 20, index_interval_bytes=100))
    fill(log, 200, count=2, value_size=50)
    for bound in (1, 2, 3, 50, 51, 52, 200, 399, 400):
        got = split_batches(log.read(0, 1 << 20, upper_bound=bound))
        assert [base_offset_of(b) for b in got] == list(range(0, bound - 1, 2))
    sizes = len(make_batch(2, 50))
    for limit in (sizes * 7, sizes * 7 + 1, sizes * 100 - 1):
        got = split_batches(log.read(10, limit))
        assert len(got) == limit // sizes
        assert base_offset_of(got[0]) == 10


def test_read_to_gives_the_offset_after_the_data(open_log):
    log = open_log(LogConfig(segment_bytes=1 << 20, index_interval_bytes=100))
    fill(log, 200, count=2, value_size=50)  # batches at 0, 2, 4, ...
    size = len(make_batch(2, 50))
    for start, limit, bound in ((0, size * 7, None), (10, size * 7 + 1, None), (3, 1 << 20, 51),
                                (0, 1 << 20, None), (400, 100, None), (0, 10, 1)):
        data, after = log.read_to(start, limit, upper_bound=bound)
        got = split_batches(data)
        assert data == log.read(start, limit, upper_bound=bound)
        # The base offset of the first batch left out (or the log end): batches hold 2 offsets.
        assert after == (base_offset_of(got[-1]) + 2 if got else start)


def test_read_to_across_segments(open_log):
    log = open_log()
    fill(log, 100, count=2, value_size=200)
    first = log.segments[0]
    data, after = log.read_to(0, 1 << 30)
    assert len(data) == first.size and after == first.next_offset == log.segments[1].base_offset


def test_read_out_of_range(open_log):
    log = open_log()
    fill(log, 2)
    assert len(log.read(6, 100)) == 0
    with pytest.raises(OffsetOutOfRange) as err:
        log.read(7, 100)
    assert err.value.error_code == 1
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_roll_at_segment_bytes(open_log):
    log = open_log()
    sent = fill(log, 100, count=2, value_size=200)
    segments = log.segments
    assert len(segments) >= 3
    batch_size = len(sent[0][1])
    per_segment = (16 * 1024) // batch_size
    assert [s.base_offset for s in segments] == [i * per_segment * 2 for i in range(len(segments))]
    for seg in segments[:-1]:
        # Rolled segments are trimmed to their data.
        assert os.path.getsize(seg.path) == seg.size == per_segment * batch_size
    assert os.path.getsize(segments[-1].path) == 16 * 1024  # active: preallocated
    for info, batch in sent:
        got = split_batches(log.read(info.base_offset, 1))
        assert same_apart_from_offset(got[0], batch)
        assert base_offset_of(got[0]) == info.base_offset


def test_read_stays_within_one_segment(open_log):
    log = open_log()
    fill(log, 100, count=2, value_size=200)
    first = log.segments[0]
    data = log.read(0, 1 << 30)
    assert len(data) == first.size


def test_roll_by_segment_ms_uses_batch_timestamps(open_log):
    log = open_log(LogConfig(segment_ms=1000))
    log.append(make_batch(1, timestamp=TS0))
    log.append(make_batch(1, timestamp=TS0 + 1000))
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=TS0 + 1001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_segment_ms_without_timestamps_uses_clock(open_log, clock):
    log = open_log(LogConfig(segment_ms=1000))
    log.append(make_batch(1, timestamp=-1))
    clock.now += 1001
    log.append(make_batch(1, timestamp=-1), now_ms=clock.now)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_batch_larger_than_segment_is_refused(open_log):
    log = open_log(LogConfig(segment_bytes=1000))
    with pytest.raises(RecordBatchTooLarge) as err:
        log.append(make_batch(1, 2000))
    assert err.value.error_code == 18
    assert log.log_end_offset == 0
    log.append(make_batch(1, 100))
    assert log.log_end_offset == 1


def test_index_lookups_across_segments(open_log):
    log = open_log(LogConfig(segment_bytes=8 * 1024, index_interval_bytes=256))
    sent = []
    for i in range(300):
        sent.append(log.append(make_batch(1 + i % 4, 20 + (i * 37) % 300)))
    assert len(log.segments) > 3
    assert sum(len(s.index) for s in log.segments) > 100
    bases = {info.base_offset: info for info in sent}
    for info in sent:
        for offset in range(info.base_offset, info.last_offset + 1):
            got = split_batches(log.read(offset, 1))
            assert base_offset_of(got[0]) == info.base_offset
    assert len(bases) == 300


def test_offset_for_timestamp_exact_record(open_log):
    log = open_log(LogConfig(segment_bytes=4096, index_interval_bytes=256))
    # 100 batches of 4 records with timestamps TS0 + 10*i + {0, 2, 4, 6}.
    for i in range(100):
        log.append(make_batch(4, 30, timestamps=[TS0 + 10 * i + d for d in (0, 2, 4, 6)]))
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, TS0)
    assert log.offset_for_timestamp(TS0 + 3) == (2, TS0 + 4)
    assert log.offset_for_timestamp(TS0 + 500) == (200, TS0 + 500)
    assert log.offset_for_timestamp(TS0 + 505) == (203, TS0 + 506)
    assert log.offset_for_timestamp(TS0 + 507) == (204, TS0 + 510)
    assert log.offset_for_timestamp(TS0 + 996) == (399, TS0 + 996)
    assert log.offset_for_timestamp(TS0 + 997) is None
    assert log.max_timestamp_offset() == (399, TS0 + 996)


def test_offset_for_timestamp_out_of_order_timestamps(open_log):
    log = open_log(LogConfig(index_interval_bytes=0))
    log.append(make_batch(2, timestamps=[TS0 + 50, TS0 + 10]))  # offsets 0, 1
    log.append(make_batch(2, timestamps=[TS0 + 20, TS0 + 30]))  # offsets 2, 3
    log.append(make_batch(1, timestamps=[TS0 + 40]))  # offset 4
    assert log.offset_for_timestamp(TS0 + 15) == (0, TS0 + 50)
    assert log.offset_for_timestamp(TS0 + 51) is None
    assert log.max_timestamp_offset() == (0, TS0 + 50)


def test_offset_for_timestamp_without_record_decoder(open_log, monkeypatch):
    import minibroker_storage.log

    monkeypatch.setattr(minibroker_storage.log, "_decode", lambda batch: None)
    log = open_log()
    log.append(make_batch(4, timestamps=[TS0, TS0 + 2, TS0 + 4, TS0 + 6]))
    log.append(make_batch(4, timestamps=[TS0 + 10, TS0 + 12, TS0 + 14, TS0 + 16]))
    # Batch granularity: the batch's base offset and max timestamp.
    assert log.offset_for_timestamp(TS0 + 3) == (0, TS0 + 6)
    assert log.offset_for_timestamp(TS0 + 7) == (4, TS0 + 16)
    assert log.max_timestamp_offset() == (7, TS0 + 16)


def test_reopen_after_clean_close(tmp_path, open_log):
    log = open_log()
    sent = fill(log, 80, count=2, value_size=150)
    before = bytes(log.read(0, 1 << 20))
    segments_before = [(s.base_offset, s.size, s.index.entries(), s.time_index.entries()) for s in log.segments]
    log.close()
    assert os.path.exists(tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE)
    active = log.segments[-1]
    assert os.path.getsize(active.path) == active.size  # trimmed
    with pytest.raises(LogClosed):
        log.append(make_batch())

    log = open_log()
    assert not os.path.exists(tmp_path / "t-0" / CLEAN_SHUTDOWN_FILE)
    assert log.log_end_offset == 160
    assert bytes(log.read(0, 1 << 20)) == before
    after = [(s.base_offset, s.size, s.index.entries(), s.time_index.entries()) for s in log.segments]
    assert after == segments_before
    info = log.append(make_batch(2))
    assert info.base_offset == 160
    assert log.max_timestamp_offset() == (158, TS0 + 79)
    assert sent[-1][0].last_offset == 159


def test_views_survive_roll_close_and_delete(open_log):
    log = open_log(LogConfig(segment_bytes=2048, retention_bytes=0))
    first = make_batch(1, 1500)
    log.append(first)
    held = log.read(0, 1 << 20)
    log.append(make_batch(1, 1500))  # rolls; the held view pins the old map
    assert log.apply_retention() == 1  # deletes the segment under the view
    assert log.log_start_offset == 1
    assert bytes(held)[8:] == first[8:]
    held2 = log.read(1, 1 << 20)
    log.close()
    assert len(bytes(held2)) == len(first)
    del held, held2


def test_flush_modes(open_log, clock):
    log = open_log(LogConfig(segment_bytes=4096, flush=FlushPolicy("always")))
    fill(log, 40)
    assert len(log.segments) > 1
    log.close()

    log = open_log(LogConfig(flush=FlushPolicy("interval", 100)), name="t-1")
    log.append(make_batch())
    assert log.flush_due_ms(clock.now + 50) > clock.now + 50
    assert log.flush_due_ms(clock.now + 100) <= clock.now + 100
    clock.now += 500
    log.append(make_batch())  # flushes inline: interval passed
    assert log.flush_due_ms(clock.now) > clock.now


def test_iter_file_batches(open_log):
    log = open_log()
    sent = fill(log, 5)
    path = log.segments[0].path
    got = list(iter_file_batches(path))  # active segment: zeros after the data
    assert [h.base_offset for h, _ in got] == [0, 3, 6, 9, 12]
    assert [bytes(v)[8:] for _, v in got] == [b[8:] for _, b in sent]
    log.close()
    got = list(iter_file_batches(path, check_crc=True))
    assert got[-1][0].end == os.path.getsize(path)


def test_delete(tmp_path, open_log):
    log = open_log()
    fill(log, 3)
    log.delete()
    assert not os.path.exists(tmp_path / "t-0")


def test_reconfigure_segment_bytes(open_log):
    log = open_log(LogConfig(segment_bytes=64 * 1024))
    fill(log, 4)
    log.reconfigure(LogConfig(segment_bytes=1024, retention_ms=5))
    assert log.config.retention_ms == 5
    fill(log, 1)
    assert len(log.segments) == 2
    fill(log, 4)
    assert all(s.size <= 1024 for s in log.segments[1:])


def test_reopen_with_smaller_segment_bytes(open_log):
    log = open_log(LogConfig(segment_bytes=64 * 1024))
    fill(log, 20)
    log.close()
    log = open_log(LogConfig(segment_bytes=1024))
    fill(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 60]
