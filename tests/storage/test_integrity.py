"""What is on disk is checked before it is served (issue 13, defects 1 and 4).

Every segment without a valid "verified" mark has its checksums checked at
open, whatever the shutdown was; a bad tail of the last segment is cut, a bad
batch in a sealed one is kept and refused to readers (CorruptBatch, answered
CORRUPT_MESSAGE by Fetch).
"""

import os
import struct

import pytest
import structlog
from crc32c import crc32c
from structlog.testing import LogCapture

import minibroker_storage.segment
from minibroker_storage import LogConfig
from minibroker_storage.verified_marks import MARKS_FILE, VerifiedMarks
from minibroker_storage.verify import BadBatch, CorruptBatch, GoodBatch, verify_batches

from .batches import TS0, base_offset_of, crash, make_batch, split_batches

CONFIG = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)


@pytest.fixture
def events(monkeypatch):
    cap = LogCapture()
    logger = structlog.wrap_logger(
        structlog.ReturnLogger(),
        processors=[cap],
        wrapper_class=structlog.make_filtering_bound_logger(0),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(minibroker_storage.segment, "log", logger)
    return cap.entries


def fill(log, n, count=2, value_size=120):
    return [log.append(make_batch(count, value_size, fill=i, timestamp=TS0 + i)) for i in range(n)]


def read_all(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        got = split_batches(log.read(offset, 1 << 20))
        out.extend(got)
        offset = base_offset_of(got[-1]) + struct.unpack_from(">i", got[-1], 23)[0] + 1
    return out


def crc_ok(batch: bytes) -> bool:
    return crc32c(batch[21:]) == struct.unpack_from(">I", batch, 17)[0]


def flip(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


def in_segment(log, info):
    """The segment holding the batch of AppendInfo ``info``."""
    return [s for s in log.segments if s.base_offset <= info.base_offset < s.next_offset][0]


# ------------------------------------------------------------- defect 1


def test_corrupt_tail_after_clean_stop_is_cut(open_log, events):
    """The issue's case: after a clean stop, garbage over the end of the last
    batch was served (and killed the coordinators' replay); now it is cut as
    after a crash, and logged with where and why."""
    log = open_log(CONFIG)
    infos = fill(log, 10)
    last = infos[-1]
    path = log.segments[-1].path
    log.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size - 20)
        f.write(os.urandom(20))

    log = open_log(CONFIG)
    assert log.log_end_offset == last.base_offset
    assert all(crc_ok(b) for b in read_all(log))
    assert log.append(make_batch(1)).base_offset == last.base_offset
    [cut] = [e for e in events if e["event"] == "segment.truncated"]
    assert cut["topic"] == "t" and cut["partition"] == 0
    assert cut["position"] == last.start_position
    assert cut["bytes_removed"] == size - last.start_position
    assert "crc" in cut["reason"]


def test_garbage_appended_after_clean_stop_is_cut(open_log, events):
    log = open_log(CONFIG)
    fill(log, 10)
    path = log.segments[-1].path
    log.close()
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(os.urandom(20))
    log = open_log(CONFIG)
    assert log.log_end_offset == 20
    assert os.path.getsize(path) >= size
    [cut] = [e for e in events if e["event"] == "segment.truncated"]
    assert cut["bytes_removed"] == 20 and cut["position"] == size


# ------------------------------------------------------------- defect 4


def test_flipped_byte_in_sealed_segment_is_refused_not_served(open_log, events):
    log = open_log(CONFIG)
    infos = fill(log, 150)
    assert len(log.segments) >= 3
    log.close()
    victim = infos[20]
    seg = in_segment(log, victim)
    assert seg is not log.segments[-1]
    flip(seg.path, victim.start_position + 100)

    log = open_log(CONFIG)
    assert log.log_end_offset == 300  # nothing cut: the segment is sealed
    with pytest.raises(CorruptBatch) as err:
        log.read(victim.base_offset, 1 << 20)
    assert err.value.error_code == 2  # CORRUPT_MESSAGE
    assert err.value.bad.position == victim.start_position
    assert err.value.next_offset == victim.last_offset + 1
    # A read from before it stops short of it; the batch after it is served.
    before = split_batches(log.read(infos[18].base_offset, 1 << 20))
    assert base_offset_of(before[-1]) == infos[19].base_offset
    after = split_batches(log.read(victim.last_offset + 1, 1 << 20))
    assert base_offset_of(after[0]) == infos[21].base_offset
    assert all(crc_ok(b) for b in before + after)
    [bad] = [e for e in events if e["event"] == "segment.corrupt_batch"]
    assert (bad["topic"], bad["partition"], bad["position"], bad["first_offset"]) == (
        "t", 0, victim.start_position, victim.base_offset)
    assert [(base, b.position) for base, b in log.bad_batches()] == [(seg.base_offset, victim.start_position)]


def test_corrupt_length_field_resyncs_at_the_index(open_log):
    """A flipped batch length (outside the CRC) hides where the next batch
    starts: the walk picks up again at the next offset index entry."""
    log = open_log(CONFIG)
    infos = fill(log, 150)
    log.close()
    victim = infos[3]
    seg = in_segment(log, victim)
    with open(seg.path, "r+b") as f:
        f.seek(victim.start_position + 8)
        f.write(struct.pack(">i", 7))
    log = open_log(CONFIG)
    [(base, bad)] = log.bad_batches()
    assert bad.position == victim.start_position and bad.first_offset == victim.base_offset
    with pytest.raises(CorruptBatch):
        log.read(victim.base_offset, 1 << 20)
    resumed = split_batches(log.read(bad.next_offset, 1 << 20))
    assert base_offset_of(resumed[0]) == bad.next_offset
    assert all(crc_ok(b) for b in resumed)


def test_last_batch_of_sealed_segment_bad(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 150)
    log.close()
    seg = log.segments[0]
    victim = [i for i in infos if in_segment(log, i) is seg][-1]
    flip(seg.path, victim.start_position + 80)
    log = open_log(CONFIG)
    assert log.segments[0].next_offset == log.segments[1].base_offset
    with pytest.raises(CorruptBatch):
        log.read(victim.last_offset, 1 << 20)
    assert split_batches(log.read(log.segments[1].base_offset, 1 << 20))


def test_clean_restart_trusts_the_marks_and_rechecks_a_touched_segment(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 150)
    log.close()
    marks = VerifiedMarks.load(log.path)
    assert all(s.base_offset in marks for s in log.segments)

    log = open_log(CONFIG)
    assert not log.bad_batches()
    log.close()
    # Bit rot that keeps size and mtime is the scrub's job, not the open's.
    victim = infos[5]
    seg = in_segment(log, victim)
    st = os.stat(seg.path)
    flip(seg.path, victim.start_position + 90)
    os.utime(seg.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    log = open_log(CONFIG)
    assert not log.bad_batches()
    log.close()
    # Any write that changes the mtime makes the open check it again.
    os.utime(seg.path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    log = open_log(CONFIG)
    assert [b.position for _, b in log.bad_batches()] == [victim.start_position]
    log.close()
    # A segment known to be bad is never marked verified.
    assert seg.base_offset not in VerifiedMarks.load(log.path)


def test_segments_sealed_before_a_crash_are_checked(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 150)
    crash(log)  # no marks for what was sealed in that run
    victim = infos[7]
    flip(in_segment(log, victim).path, victim.start_position + 90)
    log = open_log(CONFIG)
    assert [b.position for _, b in log.bad_batches()] == [victim.start_position]


def test_marks_file_is_per_partition_and_removable(open_log, tmp_path):
    log = open_log(CONFIG)
    fill(log, 150)
    log.close()
    os.unlink(tmp_path / "t-0" / MARKS_FILE)
    log = open_log(CONFIG)  # costs a full check, nothing else
    assert log.log_end_offset == 300 and not log.bad_batches()


def test_scrub_found_bad_batch_is_refused_from_then_on(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 150)
    victim = infos[2]
    seg = in_segment(log, victim)
    bad = BadBatch(victim.start_position, infos[3].start_position, victim.base_offset,
                   victim.last_offset + 1, "crc mismatch")
    assert log.mark_bad(seg.base_offset, [bad]) == [bad]
    assert log.mark_bad(seg.base_offset, [bad]) == []
    with pytest.raises(CorruptBatch):
        log.read(victim.base_offset, 1 << 20)
    assert base_offset_of(split_batches(log.read(infos[0].base_offset, 1 << 20))[-1]) == infos[1].base_offset
    # The active segment is never marked: what is being appended was checked on the way in.
    assert log.mark_bad(log.segments[-1].base_offset, [bad]) == []


def test_verify_batches_reports_each_region():
    batches = [bytearray(make_batch(2, 50, base_offset=2 * i, fill=i)) for i in range(6)]
    batches[1][70] ^= 1  # CRC
    struct.pack_into(">q", batches[3], 0, 99)  # base offset (outside the CRC)
    data = b"".join(batches) + b"\x00" * 100
    out = list(verify_batches(lambda p, n: data[p:p + n], len(data), 0))
    kinds = [(type(x).__name__, x.position) for x in out]
    pos = [sum(len(b) for b in batches[:i]) for i in range(7)]
    assert kinds == [("GoodBatch", pos[0]), ("BadBatch", pos[1]), ("GoodBatch", pos[2]),
                     ("BadBatch", pos[3]), ("GoodBatch", pos[4]), ("GoodBatch", pos[5]),
                     ("BadBatch", pos[6])]
    assert "crc" in out[1].reason and "base offset 99" in out[3].reason
    assert out[1].first_offset == 2 and out[1].next_offset == 4
    assert out[-1].tail and out[-1].zeroed
    assert all(isinstance(x, GoodBatch) for x in verify_batches(lambda p, n: data[p:p + n], pos[1], 0))


def test_clean_restart_reads_no_segment_again(open_log, events):
    """The marks keep a clean restart from reading every byte; a crash
    re-checks only the last segment and those sealed since the last open."""
    log = open_log(CONFIG)
    fill(log, 150)
    log.close()
    events.clear()
    log = open_log(CONFIG)
    assert not [e for e in events if e["event"] == "segment.verified"]
    fill(log, 60)
    sealed_in_this_run = [s.base_offset for s in log.segments[-3:-1]]
    crash(log)
    events.clear()
    log = open_log(CONFIG)
    checked = [e["segment"] for e in events if e["event"] == "segment.verified"]
    assert sorted(os.path.basename(p) for p in checked) == sorted(
        f"{b:020d}.log" for b in sealed_in_this_run + [log.segments[-1].base_offset])


def test_trusted_sealed_segment_with_a_broken_tail_is_never_cut(open_log):
    """A marked segment is opened from its indexes; if its last batches do
    not line up (rot in a length field), it is checked batch by batch and the
    damage kept and refused - cutting a sealed segment would lose offsets."""
    log = open_log(CONFIG)
    infos = fill(log, 150)
    log.close()
    seg = log.segments[0]
    victim = [i for i in infos if in_segment(log, i) is seg][-1]
    size_before = os.path.getsize(seg.path)
    st = os.stat(seg.path)
    with open(seg.path, "r+b") as f:
        f.seek(victim.start_position + 8)
        f.write(struct.pack(">i", 5))
    os.utime(seg.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    log = open_log(CONFIG)
    assert os.path.getsize(seg.path) == size_before
    assert [b.position for _, b in log.bad_batches()] == [victim.start_position]
    with pytest.raises(CorruptBatch):
        log.read(victim.base_offset, 1 << 20)
    assert log.log_end_offset == 300


def test_good_spans_leave_out_the_bad_regions(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 150)
    log.close()
    victim = infos[4]
    seg = in_segment(log, victim)
    flip(seg.path, victim.start_position + 90)
    log = open_log(CONFIG)
    seg = in_segment(log, victim)
    [(_, bad)] = log.bad_batches()
    assert seg.good_spans() == [(0, bad.position), (bad.end, seg.size)]
    assert seg.good_spans(bad.position + 1) == [(bad.end, seg.size)]
    assert log.segments[-1].good_spans() == [(0, log.segments[-1].size)]
