"""dump-log prints segment files in kafka-dump-log.sh's format, read through storage's parsers,
and says what is wrong with them in one line each, never with a traceback."""

from __future__ import annotations

import io
import os
import random
import struct

import pytest

from minibroker.cli.dump_log import dump, main
from minibroker_protocol.records import build_batch, build_control_batch
from minibroker_storage.config import LogConfig
from minibroker_storage.log import PartitionLog


def _log_with_batches(tmp_path):
    plog = PartitionLog.open(str(tmp_path / "t-0"), LogConfig())
    plog.append(build_batch([{"key": b"k1", "value": b"hello", "timestamp": 1000},
                             {"key": None, "value": b"world", "timestamp": 1001,
                              "headers": [("h", b"v")]}]))
    plog.append(build_batch([{"key": b"z", "value": b"zipped" * 10, "timestamp": 2000}],
                            compression="zstd", producer_id=7, producer_epoch=1,
                            base_sequence=0, transactional=True))
    plog.append(build_control_batch(producer_id=7, producer_epoch=1, commit=True,
                                    coordinator_epoch=3, timestamp_ms=3000))
    plog.close()
    return tmp_path / "t-0" / "00000000000000000000.log"


def test_dump_log_matches_kafka_format(tmp_path):
    path = _log_with_batches(tmp_path)
    out = io.StringIO()
    assert dump(path, print_data=True, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "position: 0 CreateTime: 1001 size: ")
    assert lines[2].endswith("magic: 2 compresscodec: NONE crc: " + lines[2].split("crc: ")[1].split()[0]
                             + " isvalid: true")
    assert lines[3] == ("| offset: 0 CreateTime: 1000 keysize: 2 valuesize: 5 sequence: -1 "
                        "headerKeys: [] key: k1 payload: hello")
    assert lines[4] == ("| offset: 1 CreateTime: 1001 keysize: -1 valuesize: 5 sequence: -1 "
                        "headerKeys: [h] payload: world")
    assert "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 " \
           "producerEpoch: 1" in lines[5]
    assert "isTransactional: true isControl: false" in lines[5] and "compresscodec: ZSTD" in lines[5]
    assert lines[6].endswith("sequence: 0 headerKeys: [] key: z payload: " + "zipped" * 10)
    assert "isTransactional: true isControl: true" in lines[7] and "size: 78" in lines[7]
    assert lines[8] == ("| offset: 3 CreateTime: 3000 keysize: 4 valuesize: 6 sequence: -1 "
                        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert len(lines) == 9


def test_dump_log_flags_corrupt_batch(tmp_path, capsys):
    path = _log_with_batches(tmp_path)
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records
    path.write_bytes(bytes(data))
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    batch_lines = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert "isvalid: false" in batch_lines[0]
    assert all("isvalid: true" in line for line in batch_lines[1:])


def test_the_cli_says_each_problem_on_stderr(tmp_path):
    """`minibroker dump-log` as a user runs it: stdout keeps kafka-dump-log.sh's lines
    (isvalid: false, "Found N invalid bytes"), stderr has one line per problem, exit 1."""
    import subprocess
    import sys

    from crc32c import crc32c

    path = _log_with_batches(tmp_path)
    good = path.read_bytes()
    data = bytearray(good)
    data[70] ^= 0xFF  # inside the first batch's records
    path.write_bytes(bytes(data) + b"\x07" * 9)  # and a torn tail

    def run():
        return subprocess.run([sys.executable, "-m", "minibroker", "dump-log", str(path)],
                              capture_output=True, text=True, timeout=60)

    r = run()
    assert r.returncode == 1, r
    stored = struct.unpack(">I", good[17:21])[0]
    size = 12 + struct.unpack(">i", good[8:12])[0]
    computed = crc32c(bytes(data[21:size]))
    batches = [line for line in r.stdout.splitlines() if line.startswith("baseOffset:")]
    assert batches[0].endswith(f"crc: {stored} isvalid: false") and len(batches) == 3, r.stdout
    assert all(line.endswith("isvalid: true") for line in batches[1:]), r.stdout
    assert r.stdout.splitlines()[-1] == f"Found 9 invalid bytes at the end of {path.name}"
    assert r.stderr.splitlines() == [
        f"Invalid batch in {path} at position 0 (baseOffset 0 lastOffset 1): crc {stored}, "
        f"the data's is {computed}",
        f"Invalid bytes at the end of {path}: 9 from position {len(good)}",
    ], r.stderr
    path.write_bytes(good)
    r = run()
    assert r.returncode == 0 and r.stderr == "" and "isvalid: false" not in r.stdout, r


def test_dump_log_missing_file(tmp_path, capsys):
    assert main([str(tmp_path / "nope.log")]) == 2


# --------------------------------------------------------------------- issue 13

SEG0 = "00000000000000000000"


def _partition(tmp_path, roll: bool = True):
    """t-0 closed cleanly: one producer's transactions (every other one aborted), two
    segments when ``roll``, index entries every ~100 bytes, producer snapshots."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=4096 if roll else 1 << 20, index_interval_bytes=100)
    plog = PartitionLog.open(str(directory), config)
    for i in range(30):
        plog.append(build_batch([{"key": b"k", "value": b"v%d" % i * 20, "timestamp": 1000 + i}],
                                producer_id=7, producer_epoch=0, base_sequence=i, transactional=True))
        if i % 5 == 4:
            plog.append(build_control_batch(producer_id=7, producer_epoch=0, commit=i % 10 == 4,
                                            coordinator_epoch=3, timestamp_ms=3000 + i))
    plog.close()
    return directory


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_directory_dumps_every_segment_file_in_offset_order(tmp_path, capsys):
    directory = _partition(tmp_path)
    rc, out, err = _run(capsys, directory)
    assert rc == 0, err
    assert err == ""
    dumped = [line.split("/")[-1] for line in out.splitlines() if line.startswith("Dumping ")]
    assert dumped == [f"{SEG0}.log", f"{SEG0}.index", f"{SEG0}.timeindex", f"{SEG0}.txnindex",
                      "00000000000000000035.log", "00000000000000000035.index",
                      "00000000000000000035.timeindex", "00000000000000000035.txnindex",
                      "00000000000000000035.snapshot", "00000000000000000036.snapshot"]
    assert "offset: 1 position: 109" in out.splitlines()
    assert "timestamp: 3004 offset: 5" in out.splitlines()
    # Kafka's AbortedTxn fields; i=9 and i=19 aborted (markers at offsets 11 and 23).
    assert "version: 0 producerId: 7 firstOffset: 6 lastOffset: 11 lastStableOffset: 12" in out.splitlines()
    assert "version: 0 producerId: 7 firstOffset: 18 lastOffset: 23 lastStableOffset: 24" in out.splitlines()
    assert ("producerId: 7 producerEpoch: 0 coordinatorEpoch: 3 currentTxnFirstOffset: -1 "
            "lastTimestamp: 3029 firstSequence: 29 lastSequence: 29 lastOffset: 34 offsetDelta: 0 "
            "timestamp: 1029") in out.splitlines()
    assert "invalid" not in out.replace("isvalid: true", "")


def test_data_dir_is_refused_in_one_line(tmp_path, capsys):
    _partition(tmp_path)
    rc, out, err = _run(capsys, tmp_path)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "no segment files" in err and "<topic>-<partition>" in err


def test_truncated_log_reports_invalid_bytes(tmp_path, capsys):
    log = _partition(tmp_path, roll=False) / f"{SEG0}.log"
    data = log.read_bytes()
    log.write_bytes(data[:-30])  # the last batch (the marker at 35, 78 bytes) loses its end
    rc, out, err = _run(capsys, log)
    assert rc == 1, out
    lines = out.splitlines()
    assert lines[-1] == f"Found {78 - 30} invalid bytes at the end of {log.name}"
    assert lines[-2].startswith("baseOffset: 34 lastOffset: 34 ")


def test_random_bytes_report_invalid_bytes(tmp_path, capsys):
    path = tmp_path / f"{SEG0}.log"
    path.write_bytes(random.Random(13).randbytes(4096))
    rc, out, err = _run(capsys, path)
    assert rc == 1
    assert out.splitlines() == [f"Dumping {path}", "Log starting offset: 0",
                                f"Found 4096 invalid bytes at the end of {path.name}"]


def test_zeroed_tail_is_preallocated_space_not_an_error(tmp_path, capsys):
    plog = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=1 << 20))
    plog.append(build_batch([{"key": None, "value": b"x", "timestamp": 1}]))
    try:
        rc, out, err = _run(capsys, tmp_path / "t-0" / f"{SEG0}.log")  # the active segment
    finally:
        plog.close()
    assert rc == 0, out + err
    assert out.splitlines()[-1].startswith("Found ") and "zero bytes (space preallocated" in out


@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex", ".txnindex", ".snapshot"])
def test_random_bytes_of_every_kind_are_reported_not_raised(tmp_path, capsys, suffix):
    _partition(tmp_path, roll=False)
    path = tmp_path / "t-0" / (SEG0 + suffix)
    path.write_bytes(random.Random(suffix).randbytes(1003))
    rc, out, err = _run(capsys, path)
    assert rc == 1, out + err
    assert "Traceback" not in err


def test_index_entries_checked_against_the_log(tmp_path, capsys):
    directory = _partition(tmp_path, roll=False)
    index = directory / f"{SEG0}.index"
    good = index.read_bytes()
    rc, out, err = _run(capsys, index)
    assert rc == 0 and err == "", err
    # Entry 2 says offset 3 is at the position of offset 4's batch.
    entries = list(struct.iter_unpack(">ii", good))
    entries[2] = (entries[2][0], entries[3][1])
    entries[3] = (entries[3][0], entries[3][1] + 1)
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    rc, out, err = _run(capsys, index)
    assert rc == 1
    assert "Mismatches in :" + str(index) in err.splitlines()
    assert "  Index offset: 3, log offset: 4" in err.splitlines()
    assert "  Index offset: 4, log offset: -1" in err.splitlines()


def test_index_sanity_problems_and_partial_entry(tmp_path, capsys):
    directory = _partition(tmp_path, roll=False)
    index = directory / f"{SEG0}.index"
    entries = list(struct.iter_unpack(">ii", index.read_bytes()))
    entries[1], entries[2] = entries[2], entries[1]
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries) + b"\x01\x02\x03")
    rc, out, err = _run(capsys, index)
    assert rc == 1
    assert f"Found 3 invalid bytes at the end of {index.name}" in out.splitlines()
    assert "  entry 2: Index offset 2 is not larger than the previous, 3" in err.splitlines()


def test_time_index_checked_against_the_log(tmp_path, capsys):
    directory = _partition(tmp_path, roll=False)
    tindex = directory / f"{SEG0}.timeindex"
    entries = list(struct.iter_unpack(">qi", tindex.read_bytes()))
    entries[0] = (entries[0][0] - 1, entries[0][1])  # a timestamp the batch does not have
    entries[1] = (entries[1][0], entries[1][1] + 100)  # an offset past the log
    tindex.write_bytes(b"".join(struct.pack(">qi", *e) for e in entries))
    rc, out, err = _run(capsys, tindex)
    assert rc == 1
    lines = err.splitlines()
    assert lines[lines.index(f"Found timestamp mismatch in :{tindex}") + 1] == \
        f"  Index timestamp: {entries[0][0]}, log timestamp: {entries[0][0] + 1}"
    assert f"Indexed offset: {entries[1][1]}, found log offset: -1" in lines


def test_txn_index_checked_against_the_log(tmp_path, capsys):
    directory = _partition(tmp_path, roll=False)
    txn = directory / f"{SEG0}.txnindex"
    data = txn.read_bytes()
    # The first of the 3 entries now ends at offset 5, a COMMIT marker; a version-1 entry follows.
    first = struct.pack(">hqqqq", 0, 7, 0, 5, 6)
    txn.write_bytes(first + data[34:] + struct.pack(">hqqqq", 1, 7, 30, 35, 36))
    rc, out, err = _run(capsys, txn)
    assert rc == 1
    assert "version: 0 producerId: 7 firstOffset: 0 lastOffset: 5 lastStableOffset: 6" in out
    assert "version: 1 producerId: 7 firstOffset: 30 lastOffset: 35 lastStableOffset: 36" in out
    assert "  entry 3: entry version 1" in err.splitlines()
    assert "  producerId: 7 lastOffset: 5, log holds: COMMIT marker of producer 7" in err.splitlines()


def test_corrupt_snapshot_is_one_line(tmp_path, capsys):
    directory = _partition(tmp_path, roll=False)
    snap = sorted(directory.glob("*.snapshot"))[-1]
    snap.write_bytes(snap.read_bytes()[:-3])
    rc, out, err = _run(capsys, snap)
    assert rc == 1
    assert err.splitlines() == [f"Corrupt producer snapshot {snap}: CRC-32C mismatch"]


def test_unknown_kind_and_missing_file_dump_nothing(tmp_path, capsys):
    directory = _partition(tmp_path, roll=False)
    other = directory / "leader-epoch-checkpoint"
    other.write_text("0\n")
    rc, out, err = _run(capsys, directory / f"{SEG0}.log", other)
    assert rc == 2 and out == ""
    assert err.splitlines() == [f"minibroker dump-log: {other}: not a segment file (expected .log, .index, "
                                ".timeindex, .txnindex, .snapshot or a partition directory)"]
    rc, out, err = _run(capsys, directory / "nope.log")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "no such file" in err


def test_unreadable_file_is_one_line_and_the_others_are_dumped(tmp_path, capsys, monkeypatch):
    directory = _partition(tmp_path, roll=False)
    locked = directory / f"{SEG0}.index"
    real_open = os.open

    def deny(path, flags, *args, **kwargs):
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    rc, out, err = _run(capsys, directory)
    assert rc == 2
    assert err.splitlines() == [f"minibroker dump-log: {locked}: Permission denied"]
    assert f"Dumping {directory / (SEG0 + '.txnindex')}" in out


def test_files_option_takes_kafkas_comma_list(tmp_path, capsys):
    directory = _partition(tmp_path, roll=False)
    rc, out, _ = _run(capsys, "--files", f"{directory / (SEG0 + '.txnindex')},{directory / (SEG0 + '.index')}")
    assert rc == 0
    assert [line for line in out.splitlines() if line.startswith("Dumping")] == [
        f"Dumping {directory / (SEG0 + '.txnindex')}", f"Dumping {directory / (SEG0 + '.index')}"]


def test_closed_pipe_ends_the_dump_quietly(tmp_path):
    """`dump-log DIR | head -1`: exit 0, nothing on stderr (a closed stdout is an OSError
    too, and must not be reported as an unreadable file)."""
    import subprocess
    import sys

    plog = PartitionLog.open(str(tmp_path / "t-0"), LogConfig())
    for i in range(3000):
        plog.append(build_batch([{"key": b"k", "value": b"v" * 50, "timestamp": i}]))
    plog.close()
    proc = subprocess.Popen([sys.executable, "-m", "minibroker.cli.main", "dump-log", str(tmp_path / "t-0")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"Dumping ")
    proc.stdout.close()
    try:
        rc = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert (rc, proc.stderr.read()) == (0, b"")


def test_file_deleted_after_the_listing_is_a_note_not_an_error(tmp_path, capsys, monkeypatch):
    """A running broker's retention or snapshot rotation races the listing of a directory."""
    import minibroker.cli.dump_log as dump_log

    directory = _partition(tmp_path)
    real = dump_log.segment_file_list

    def listed_then_deleted(d):
        files = real(d)
        os.unlink(files[-1])  # the newest snapshot, as a broker taking another one would
        return files

    monkeypatch.setattr(dump_log, "segment_file_list", listed_then_deleted)
    rc, out, err = _run(capsys, directory)
    assert rc == 0, err
    assert err.splitlines() == [f"minibroker dump-log: {directory / '00000000000000000036.snapshot'}: "
                                "deleted since it was listed"]


# --------------------------------------------------------------------- issue 31

def share_state_segment(tmp_path):
    """A __share_group_state partition holding each case of the decoder: a snapshot and an
    update with their tagged DeliveryCompleteCount, a tombstone, a share group's record of
    __consumer_offsets (type 11, not the share coordinator's) and a value that does not parse."""
    import uuid

    from minibroker_protocol import share_log as sl

    tid = uuid.UUID("38ef918c-f115-4e0f-9403-2d8c45521720")
    snap_key = sl.encode_state_key(sl.ShareStateKey(sl.SHARE_SNAPSHOT, "g-ü", tid, 3))
    upd_key = sl.encode_state_key(sl.ShareStateKey(sl.SHARE_UPDATE, "g-ü", tid, 3))
    snapshot = sl.encode_value(sl.ShareSnapshotValue(
        2, 1, 0, 10, 1700000000000, 1700000000500,
        (sl.StateBatch(10, 14, sl.ACKNOWLEDGED, 1), sl.StateBatch(15, 15, sl.ARCHIVED, 5)), 4))
    update = sl.encode_value(sl.ShareUpdateValue(2, 0, 16, (sl.StateBatch(16, 16, sl.AVAILABLE, 2),), 7))
    records = [(snap_key, snapshot), (upd_key, update), (snap_key, None),
               (sl.encode_group_key(sl.ShareGroupKey(sl.SHARE_GROUP_METADATA, "g")),
                sl.encode_value(sl.GroupMetadataValue(1, 2))),
               (upd_key, update[:9])]
    directory = tmp_path / "__share_group_state-3"
    plog = PartitionLog.open(str(directory), LogConfig())
    for i, (k, v) in enumerate(records):
        plog.append(build_batch([{"key": k, "value": v, "timestamp": 5000 + i}]))
    plog.close()
    return directory / f"{SEG0}.log"


def test_share_group_state_decoder_prints_kafkas_json(tmp_path, capsys):
    path = share_state_segment(tmp_path)
    rc, out, err = _run(capsys, "--share-group-state-decoder", path)
    records = [line.split(" headerKeys: [] ", 1)[1] for line in out.splitlines() if line.startswith("| ")]
    key = '{"type":"%d","data":{"groupId":"g-ü","topicId":"OO-RjPEVTg-UAy2MRVIXIA","partition":3}}'
    assert records == [
        "key: " + key % 0 + ' payload: {"version":"0","data":{"snapshotEpoch":2,"stateEpoch":1,'
        '"leaderEpoch":0,"startOffset":10,"deliveryCompleteCount":4,"createTimestamp":1700000000000,"writeTimestamp":1700000000500,'
        '"stateBatches":[{"firstOffset":10,"lastOffset":14,"deliveryState":2,"deliveryCount":1},'
        '{"firstOffset":15,"lastOffset":15,"deliveryState":4,"deliveryCount":5}]}}',
        "key: " + key % 1 + ' payload: {"version":"0","data":{"snapshotEpoch":2,"leaderEpoch":0,'
        '"startOffset":16,"deliveryCompleteCount":7,"stateBatches":[{"firstOffset":16,"lastOffset":16,'
        '"deliveryState":0,"deliveryCount":2}]}}',
        "key: " + key % 0 + " payload: <DELETE>",
        "key: Unknown record type 11 at offset 3, skipping.",
        "key: Error at offset 4, skipping. field of 4 bytes at 6 overruns the 9-byte record",
    ], out
    # the record that does not parse is the one problem: on stderr, and the exit status says it
    assert rc == 1
    assert err.splitlines() == [f"Undecodable record in {path}: Error at offset 4, skipping. "
                                "field of 4 bytes at 6 overruns the 9-byte record"]


def test_without_the_decoder_share_state_records_are_bytes_as_kafka_prints_them(tmp_path, capsys):
    rc, out, _ = _run(capsys, "--print-data-log", share_state_segment(tmp_path))
    assert rc == 0 and '"type"' not in out and out.count("| offset: ") == 5
