"""The offline readers of every segment file kind: one parser per format, shared with
the broker's own loading rules, and the read-only cross-checks dump-log makes."""

from __future__ import annotations

import os
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker_protocol.batch import HEADER_SIZE, BatchHeader, check_batch, iter_headers
from minibroker_storage import LogConfig, PartitionLog, segment_files
from minibroker_storage.index import OffsetIndex, TimeIndex
from minibroker_storage.index_format import parse_offset_index, parse_time_index
from minibroker_storage.offline import (
    PartitionScan,
    log_tail,
    read_offset_index,
    read_txn_index,
    segment_file_list,
    summarize,
    txn_index_entries,
)
from minibroker_storage.segment import scan
from minibroker_storage.segment_checks import SegmentReader, check_offset_index, check_time_index
from minibroker_storage.segment_files import SegmentFiles, walk_segment
from minibroker_storage.txn_index import AbortedTxn, TxnIndex, parse_txn_index
from minibroker_storage.verify import BadBatch, GoodBatch, verify_batches

from .batches import make_batch
from .txns import Writer

SEG0 = "00000000000000000000"


def _filled(tmp_path, batches: int = 40):
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=200))
    for i in range(batches):
        log.append(make_batch(2, 30, timestamp=1000 + i))
    log.close()
    return tmp_path / "t-0"


def _offsets(entries) -> bytes:
    return b"".join(struct.pack(">ii", *e) for e in entries)


def test_offset_index_parse_agrees_with_the_broker(tmp_path):
    d = _filled(tmp_path)
    path, size = str(d / f"{SEG0}.index"), os.path.getsize(d / f"{SEG0}.log")
    data = open(path, "rb").read()
    contents = parse_offset_index(data, 0, size)
    assert contents.problems == [] and contents.trailing_bytes == 0 and contents.zero_entries == 0
    assert len(contents.entries) > 5
    assert contents.entries == OffsetIndex.load(path, 0, size).entries()
    with SegmentReader(str(d / f"{SEG0}.log"), 0, path) as reader:
        assert check_offset_index(reader, contents.entries) == []


def test_offset_index_problems_name_each_entry(tmp_path):
    data = _offsets([(1, 100), (3, 300), (2, 400), (5, 350), (-1, 500)]) + b"\x00\x01"
    contents = parse_offset_index(data, 10, log_size=450)
    assert contents.entries == [(11, 100), (13, 300), (12, 400), (15, 350), (9, 500)]
    assert contents.trailing_bytes == 2
    assert contents.problems == [
        (2, "Index offset 12 is not larger than the previous, 13"),
        (3, "Index position 350 (offset 15) is not larger than the previous, 400"),
        (4, "Index offset 9 is below the segment's base offset 10"),
    ]
    assert contents.usable == 2
    assert parse_offset_index(_offsets([(1, 100), (2, 460)]), 0, log_size=450).problems == [
        (1, "Index position 460 (offset 2) is past the end of the 450-byte log")]


def test_preallocated_zero_entries_are_counted_apart(tmp_path):
    contents = parse_offset_index(_offsets([(1, 100), (2, 200), (0, 0), (0, 0), (0, 0)]), 0)
    assert contents.entries == [(1, 100), (2, 200)] and contents.zero_entries == 3
    assert contents.problems == []
    path = tmp_path / f"{SEG0}.index"
    path.write_bytes(_offsets([(1, 100), (2, 200), (0, 0)]))
    assert read_offset_index(str(path), 0) == [(1, 100), (2, 200)]
    # A zero first entry is an entry, not a tail.
    assert parse_offset_index(_offsets([(0, 0)]), 0).entries == [(0, 0)]


def test_read_offset_index_keeps_the_entries_before_the_first_problem(tmp_path):
    path = tmp_path / f"{SEG0}.index"
    path.write_bytes(_offsets([(1, 100), (3, 300), (2, 400), (4, 500)]))
    assert read_offset_index(str(path), 0) == [(1, 100), (3, 300)]


def test_time_index_parse_agrees_with_the_broker(tmp_path):
    d = _filled(tmp_path)
    path = str(d / f"{SEG0}.timeindex")
    contents = parse_time_index(open(path, "rb").read(), 0, 80)
    assert contents.problems == [] and len(contents.entries) > 5
    assert contents.entries == TimeIndex.load(path, 0, 80).entries()
    with SegmentReader(str(d / f"{SEG0}.log"), 0, str(d / f"{SEG0}.index")) as reader:
        errors = check_time_index(reader, contents.entries)
        assert errors.timestamps == [] and errors.offsets == []
        ts, off = contents.entries[0]
        errors = check_time_index(reader, [(ts + 5, off), (ts, off - 1), (ts, 500)])
        assert errors.timestamps == [(ts + 5, ts)]
        assert errors.offsets == [(off - 1, off), (500, -1)]


def test_time_index_problems_use_kafkas_wording():
    data = b"".join(struct.pack(">qi", *e) for e in [(100, 1), (90, 2), (110, 1), (120, 9)])
    contents = parse_time_index(data, 0, next_offset=5)
    assert contents.problems == [
        (1, "Index timestamp: 90, Previously indexed timestamp: 100"),
        (2, "Indexed offset 1 is smaller than the previous, 2"),
        (3, "Indexed offset 9 is past the segment's last offset 4"),
    ]


def _txn(version, *fields) -> bytes:
    return struct.pack(">hqqqq", version, *fields)


def test_txn_index_parse_lists_every_problem():
    data = (_txn(0, 7, 100, 105, 106) + _txn(1, 7, 106, 107, 108) + _txn(0, 8, 100, 104, 105)
            + _txn(0, 9, 110, 109, 110) + b"\x00" * 5)
    contents = parse_txn_index(data, 100)
    assert [v for v, _ in contents.entries] == [0, 1, 0, 0]
    assert contents.entries[0][1] == AbortedTxn(7, 100, 105, 106)
    assert contents.trailing_bytes == 5 and not contents.usable
    assert [n for n, _ in contents.problems] == [1, 2, 3]
    assert "version 1" in contents.problems[0][1]
    assert "not increasing" in contents.problems[1][1]
    assert "impossible" in contents.problems[2][1]


def test_offline_and_broker_read_a_txn_index_alike(tmp_path):
    good = _txn(0, 7, 100, 105, 106) + _txn(0, 8, 101, 110, 111)
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(good)
    assert read_txn_index(str(path)) == TxnIndex.load(str(path), 100, 1000).entries
    # Markers out of order: the broker rebuilds such a file, so a tool must not trust it.
    path.write_bytes(_txn(0, 7, 100, 110, 111) + _txn(0, 8, 100, 105, 106))
    assert TxnIndex.load(str(path), 100, 1000).stale is not None
    assert read_txn_index(str(path)) is None


def test_log_tail_tells_zeros_from_garbage(tmp_path):
    path = tmp_path / f"{SEG0}.log"
    batch = make_batch(1, 10)
    path.write_bytes(batch + bytes(5000))
    assert log_tail(str(path), len(batch)) == (5000, True)
    path.write_bytes(batch + bytes(3000) + b"\x01" + bytes(100))
    assert log_tail(str(path), len(batch)) == (3101, False)
    with open(path, "wb") as f:  # sparse: a hole, like a preallocated active segment
        f.write(batch)
        f.truncate(len(batch) + (64 << 20))
    assert log_tail(str(path), len(batch)) == (64 << 20, True)
    assert log_tail(str(path), len(batch) + (64 << 20)) == (0, True)


def test_segment_file_list_orders_by_offset_then_kind(tmp_path):
    names = ["00000000000000000035.snapshot", "00000000000000000035.log", f"{SEG0}.txnindex",
             f"{SEG0}.timeindex", f"{SEG0}.index", f"{SEG0}.log", "00000000000000000035.index",
             "leader-epoch-checkpoint", f"{SEG0}.log.deleted", f"{SEG0}.index.tmp", "x.log"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    assert [os.path.basename(p) for p in segment_file_list(str(tmp_path))] == [
        f"{SEG0}.log", f"{SEG0}.index", f"{SEG0}.timeindex", f"{SEG0}.txnindex",
        "00000000000000000035.log", "00000000000000000035.index", "00000000000000000035.snapshot"]


def test_reader_distrusts_index_entries_the_log_contradicts(tmp_path):
    d = _filled(tmp_path)
    index = d / f"{SEG0}.index"
    entries = list(struct.iter_unpack(">ii", index.read_bytes()))
    # Every entry now points one batch early: a search anchored on them would start past
    # the batch it wants and miss it.
    shifted = [(off - 2, pos) for off, pos in entries]
    index.write_bytes(_offsets(shifted))
    with SegmentReader(str(d / f"{SEG0}.log"), 0, str(index)) as reader:
        assert [reader.batch_holding(o).last_offset for o in (0, 1, 2, 41, 79)] == [1, 1, 3, 41, 79]
        assert reader.batch_holding(80) is None
        assert len(check_offset_index(reader, shifted)) == len(shifted)


# -------------------------------------------------------- transactions, offline vs live

PIDS = (1, 2, 3)
_op = st.one_of(
    st.tuples(st.just("data"), st.sampled_from(PIDS), st.integers(1, 3)),
    st.tuples(st.just("data"), st.sampled_from(PIDS), st.integers(1, 3)),
    st.tuples(st.just("plain"), st.sampled_from((-1, 7)), st.integers(1, 2)),
    st.tuples(st.just("commit"), st.sampled_from(PIDS), st.just(0)),
    st.tuples(st.just("abort"), st.sampled_from(PIDS), st.just(0)),
    st.tuples(st.just("roll"), st.just(0), st.just(0)),
)


def _summary_vs_log(path: str, log, empty_aborts: set[int]) -> None:
    s = summarize(path)
    assert s.log_end == log.log_end_offset
    assert s.open_txns == dict(log.producer_state_manager.ongoing_transactions)
    assert s.last_stable == log.last_stable_offset
    # The one difference, on purpose: offline keeps an entry for an ABORT that ended no
    # transaction (its data may lie below the log start), spanning the marker alone.
    assert [t.last_offset for t in s.aborted if t.last_offset in empty_aborts] == sorted(empty_aborts)
    assert all(t.first_offset == t.last_offset for t in s.aborted if t.last_offset in empty_aborts)
    offline = [t for t in s.aborted if t.last_offset not in empty_aborts]
    assert offline == log.aborted_txns()
    end = log.log_end_offset
    for start in range(0, end + 1):
        for upper in {start + 1, start + 3, end, log.last_stable_offset}:
            if upper <= start:
                continue
            found = [(t.producer_id, t.first_offset) for t in s.aborted_between(start, upper)
                     if t.last_offset not in empty_aborts]
            assert found == log.aborted_transactions(start, upper), (start, upper)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=1, max_size=30))
def test_offline_lso_and_aborted_transactions_agree_with_the_live_log(tmp_path_factory, ops):
    path = str(tmp_path_factory.mktemp("offline") / "t-0")
    log = PartitionLog.open(path, LogConfig(index_interval_bytes=100))
    w = Writer(log, size=8)
    model: dict[int, int] = {}  # pid -> first offset of its open transaction
    empty_aborts: set[int] = set()
    try:
        for kind, pid, n in ops:
            if kind == "data":
                info = w.data(pid, n)
                model.setdefault(pid, info.base_offset)
            elif kind == "plain":
                w.plain(pid, n)
            elif kind in ("commit", "abort"):
                info = w.end(pid, commit=kind == "commit")
                if model.pop(pid, None) is None and kind == "abort":
                    empty_aborts.add(info.base_offset)
            else:
                log.roll()
        assert log.last_stable_offset == min(model.values(), default=log.log_end_offset)
        _summary_vs_log(path, log, empty_aborts)  # the broker still running
        log.close()
        expected = [t for t in PartitionLog.open(path, LogConfig()).aborted_txns()]
        assert txn_index_entries(path) == expected
        log = PartitionLog.open(path, LogConfig(index_interval_bytes=100))
        _summary_vs_log(path, log, empty_aborts)  # reopened: producer state replayed
    finally:
        if not log.closed:
            log.close()


def test_partition_scan_follows_appends(tmp_path):
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, LogConfig())
    w = Writer(log, size=8)
    scan = PartitionScan(path)
    w.data(1, 2)
    assert scan.advance().last_stable == 0 == log.last_stable_offset
    w.data(2)
    w.abort(1)
    s = scan.advance()
    assert s.last_stable == 2 == log.last_stable_offset
    assert s.aborted == log.aborted_txns()
    w.commit(2)
    s = scan.advance()
    assert s.last_stable == s.log_end == log.log_end_offset == log.last_stable_offset
    log.close()


# ------------------------------------------------------------ one judgement of a batch


def test_every_walker_stops_where_check_batch_does(tmp_path):
    d = _filled(tmp_path, batches=12)
    path = str(d / f"{SEG0}.log")
    data = bytearray(open(path, "rb").read())
    headers = list(iter_headers(data, check_crc=True))
    victim = headers[7]
    data[victim.end - 1] ^= 0xFF  # the last byte of batch 7: its CRC fails
    with open(path, "wb") as f:
        f.write(data)
    assert check_batch(data, victim.position, check_crc=True).startswith("crc mismatch")
    assert isinstance(check_batch(data, victim.position), BatchHeader)  # no CRC asked for
    want = [h.position for h in headers[:7]]
    assert [h.position for h in iter_headers(data, check_crc=True)] == want
    assert [h.position for h, _ in walk_segment(SegmentFiles(0, path), position=0)] == want
    assert [p for p, *_ in scan(data, 0, len(data), check_crc=True, expect_base=0)] == want
    found = list(verify_batches(lambda p, n: data[p:p + n], len(data), 0))
    assert [g.position for g in found if isinstance(g, GoodBatch)] == [h.position for h in headers if h != victim]
    bad = [b for b in found if isinstance(b, BadBatch)]
    assert [(b.position, b.reason[:12]) for b in bad] == [(victim.position, "crc mismatch")]


def test_sequential_walks_stop_at_an_offset_that_does_not_follow(tmp_path):
    d = _filled(tmp_path, batches=4)
    data = bytearray(open(d / f"{SEG0}.log", "rb").read())
    headers = list(iter_headers(data))
    struct.pack_into(">q", data, headers[2].position, 99)  # base offset outside the CRC
    assert len(list(iter_headers(data))) == 4
    assert len(list(iter_headers(data, sequential=True, expect_base=0))) == 2
    assert check_batch(data, headers[2].position, sequential=True, expect_base=headers[1].next_offset) == (
        f"base offset 99, expected {headers[1].next_offset}")


def test_walk_segment_reads_across_chunk_boundaries(tmp_path, monkeypatch):
    d = _filled(tmp_path, batches=30)
    path = str(d / f"{SEG0}.log")
    data = open(path, "rb").read()
    want = [(h.position, h.end) for h in iter_headers(data, check_crc=True)]
    for chunk in (HEADER_SIZE, 70, 100, 333, 1 << 20):  # smaller, larger than a batch
        monkeypatch.setattr(segment_files, "_CHUNK", chunk)
        got = list(walk_segment(SegmentFiles(0, path), position=0))
        assert [(h.position, h.end) for h, _ in got] == want, chunk
        assert all(bytes(b) == data[h.position:h.end] for h, b in got)
    with open(path, "ab") as f:
        f.write(data[want[3][0]:want[3][1]][:-5])  # a torn batch at the end
    monkeypatch.setattr(segment_files, "_CHUNK", 100)
    assert [(h.position, h.end) for h, _ in walk_segment(SegmentFiles(0, path), position=0)] == want
