import os
import struct

import pytest

from minibroker_storage import LogConfig
from minibroker_storage.log import CLEAN_SHUTDOWN_FILE

from .batches import TS0, base_offset_of, crash, make_batch, split_batches

CONFIG = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)


def fill(log, n, count=2, value_size=120):
    return [log.append(make_batch(count, value_size, fill=i, timestamp=TS0 + i)) for i in range(n)]


def read_all(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        got = split_batches(log.read(offset, 1 << 20))
        out.extend(got)
        offset = base_offset_of(got[-1]) + struct.unpack_from(">i", got[-1], 23)[0] + 1
    return out


def index_state(log):
    return [(s.base_offset, s.size, s.next_offset, s.index.entries(), s.time_index.entries()) for s in log.segments]


def test_crash_leaves_zeroed_preallocated_tail(open_log):
    log = open_log(CONFIG)
    fill(log, 100)
    expected = read_all(log)
    active = log.segments[-1]
    used = active.size
    crash(log)
    assert os.path.getsize(active.path) == CONFIG.segment_bytes

    log = open_log(CONFIG)
    assert log.log_end_offset == 200
    assert log.segments[-1].size == used
    assert read_all(log) == expected
    assert log.append(make_batch(2)).base_offset == 200


def test_recovered_indexes_match_the_appended_ones(open_log):
    log = open_log(CONFIG)
    fill(log, 100)
    before = index_state(log)
    crash(log)  # the active segment's index entries were never written
    log = open_log(CONFIG)
    assert index_state(log) == before


def test_truncated_tail(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 100)
    active = log.segments[-1]
    last = infos[-1]
    crash(log)
    with open(active.path, "r+b") as f:
        f.truncate(last.start_position + 30)

    log = open_log(CONFIG)
    assert log.log_end_offset == last.base_offset
    assert log.segments[-1].size == last.start_position
    assert log.append(make_batch(1)).base_offset == last.base_offset


def test_corrupted_byte_in_last_batch(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 100)
    active = log.segments[-1]
    last = infos[-1]
    crash(log)
    with open(active.path, "r+b") as f:
        f.seek(last.start_position + 100)
        byte = f.read(1)
        f.seek(last.start_position + 100)
        f.write(bytes([byte[0] ^ 0xFF]))

    log = open_log(CONFIG)
    assert log.log_end_offset == last.base_offset


def test_corruption_mid_segment_cuts_there(open_log):
    log = open_log(CONFIG)
    infos = fill(log, 10)
    victim = infos[4]
    crash(log)
    path = log.segments[-1].path
    with open(path, "r+b") as f:
        f.seek(victim.start_position + 70)
        f.write(b"\xff\xff\xff")

    log = open_log(CONFIG)
    assert log.log_end_offset == victim.base_offset


def test_garbage_after_last_batch(open_log):
    log = open_log(CONFIG)
    fill(log, 100)
    active = log.segments[-1]
    used = active.size
    crash(log)
    with open(active.path, "r+b") as f:
        f.seek(used)
        f.write(os.urandom(300))

    log = open_log(CONFIG)
    assert log.log_end_offset == 200
    assert log.segments[-1].size == used


def test_garbage_after_clean_close(tmp_path, open_log):
    log = open_log(CONFIG)
    fill(log, 10)
    log.close()
    with open(log.segments[-1].path, "ab") as f:
        f.write(b"\x00" * 12 + b"\x7f" * 100)
    log = open_log(CONFIG)
    assert log.log_end_offset == 20
    assert len(read_all(log)) == 10


def test_batch_copied_but_not_yet_given_its_offset(open_log):
    log = open_log(CONFIG)
    fill(log, 5)
    active = log.segments[-1]
    used = active.size
    crash(log)
    with open(active.path, "r+b") as f:
        f.seek(used)
        f.write(make_batch(2, base_offset=0))  # the producer's base offset

    log = open_log(CONFIG)
    assert log.log_end_offset == 10


def test_whole_last_segment_invalid(open_log):
    log = open_log(CONFIG)
    fill(log, 100)
    active = log.segments[-1]
    crash(log)
    with open(active.path, "r+b") as f:
        f.write(b"\x00" * 61)

    log = open_log(CONFIG)
    assert log.log_end_offset == active.base_offset
    assert log.segments[-1].size == 0
    assert log.append(make_batch(1)).base_offset == active.base_offset


def test_repeated_crashes_keep_offsets(open_log):
    expected = 0
    for _ in range(5):
        log = open_log(CONFIG)
        assert log.log_end_offset == expected
        fill(log, 30)
        expected += 60
        crash(log)
    log = open_log(CONFIG)
    assert [base_offset_of(b) for b in read_all(log)] == list(range(0, expected, 2))


@pytest.mark.parametrize(
    "damage",
    [
        "missing_index",
        "missing_time_index",
        "index_odd_size",
        "index_garbage",
        "index_wrong_offset",
        "index_past_log",
        "time_index_garbage",
    ],
)
def test_damaged_index_of_older_segment_is_rebuilt(open_log, damage):
    log = open_log(CONFIG)
    fill(log, 150)
    assert len(log.segments) >= 3
    expected = read_all(log)
    log.close()  # adds the active segment's final time index entry
    before = index_state(log)
    seg = log.segments[1]
    index, time_index = seg.index.path, seg.time_index.path
    if damage == "missing_index":
        os.unlink(index)
    elif damage == "missing_time_index":
        os.unlink(time_index)
    elif damage == "index_odd_size":
        with open(index, "ab") as f:
            f.write(b"\x01\x02\x03")
    elif damage == "index_garbage":
        with open(index, "wb") as f:
            f.write(os.urandom(64))
    elif damage == "index_wrong_offset":
        data = bytearray(open(index, "rb").read())
        struct.pack_into(">i", data, len(data) - 8, struct.unpack_from(">i", data, len(data) - 8)[0] + 1)
        open(index, "wb").write(bytes(data))
    elif damage == "index_past_log":
        with open(index, "ab") as f:
            f.write(struct.pack(">ii", 10_000, 10_000_000))
    elif damage == "time_index_garbage":
        with open(time_index, "wb") as f:
            f.write(struct.pack(">qi", 5, 3) + struct.pack(">qi", 4, 2))

    log = open_log(CONFIG)
    assert index_state(log) == before
    assert read_all(log) == expected


def test_untrimmed_older_segment_is_trimmed(open_log):
    log = open_log(CONFIG)
    fill(log, 150)
    expected = read_all(log)
    log.close()
    seg = log.segments[0]
    os.truncate(seg.path, CONFIG.segment_bytes)  # a roll that died before its trim
    os.unlink(os.path.join(os.path.dirname(seg.path), CLEAN_SHUTDOWN_FILE))
    log = open_log(CONFIG)
    assert os.path.getsize(log.segments[0].path) == seg.size
    assert read_all(log) == expected


def test_leftover_files_are_removed(tmp_path, open_log):
    log = open_log(CONFIG)
    fill(log, 10)
    log.close()
    part = tmp_path / "t-0"
    (part / "00000000000000000777.index").write_bytes(b"x" * 8)
    (part / "00000000000000000777.timeindex").write_bytes(b"x" * 12)
    (part / "00000000000000000777.txnindex").write_bytes(b"x" * 34)
    (part / "00000000000000000000.index.tmp").write_bytes(b"x")
    (part / "partition.metadata").write_text("version: 0\n")
    log = open_log(CONFIG)
    assert log.log_end_offset == 20
    names = sorted(os.listdir(part))
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000000.txnindex",
        "00000000000000000020.snapshot",  # producer state at the clean stop
        "partition.metadata",
    ]
