"""dump-log prints segments in kafka-dump-log.sh's format, read through storage."""

from __future__ import annotations

import io

from minibroker.dump_log import dump, main
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


def test_dump_log_missing_file(tmp_path, capsys):
    assert main([str(tmp_path / "nope.log")]) == 2
