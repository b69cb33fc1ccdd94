"""Start-up replay of __transaction_state and __consumer_offsets never dies: a batch or record
that does not decode is skipped with one ``txn_log.record_skipped`` / ``group_log.record_skipped``
line (topic, partition, offset, reason), and everything around it is still loaded (issue 13)."""

from __future__ import annotations

import struct

from crc32c import crc32c
from structlog.testing import capture_logs

from minibroker.broker import Broker
from minibroker.config.options import Config, FsyncPolicy
from minibroker_protocol import group_log as gl
from minibroker_protocol import txn_log as tl
from minibroker_protocol.batch import CRC_START, HEADER_SIZE
from minibroker_protocol.records import build_batch, build_control_batch
from minibroker_protocol.topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC


def cfg(tmp_path) -> Config:
    return Config(port=0, data_dir=tmp_path / "data", fsync=FsyncPolicy("never"),
                  offsets_topic_partitions=1)


def undecodable_batch(key: bytes) -> bytes:
    """A batch whose CRC is right (storage keeps it) but whose first record's length is not."""
    b = bytearray(build_batch([{"key": key, "value": b"v"}, {"key": key, "value": b"w"}]))
    b[HEADER_SIZE] = 0x7F  # zigzag varint -64: a negative record length
    struct.pack_into(">I", b, CRC_START - 4, crc32c(bytes(b[CRC_START:])))
    return bytes(b)


def txn_record(tid: str, value: bytes | None) -> dict:
    return {"key": tl.encode_key(tid), "value": value}


def good_txn(pid: int, state=tl.COMPLETE_COMMIT) -> bytes:
    return tl.encode_value(tl.TxnLogValue(pid, 2, 60_000, state, (), 1, -1))


def skipped(logs, event):
    return [e for e in logs if e["event"] == event]


async def test_transaction_log_replay_skips_what_it_cannot_read(tmp_path):
    b = Broker(cfg(tmp_path))
    plog = b.internal_log(TRANSACTION_STATE_TOPIC, 0)
    plog.append(build_batch([txn_record("before", good_txn(100))]), origin="coordinator")
    bad = [
        build_batch([{"key": b"\x00\x05\x00\x01x", "value": good_txn(1)}]),  # key version 5
        build_batch([txn_record("trunc", good_txn(2)[:9])]),  # truncated value
        build_batch([txn_record("state", good_txn(3)[:16] + b"\x2a" + good_txn(3)[17:])]),
        build_batch([{"key": None, "value": good_txn(4)}]),  # no key
        build_control_batch(producer_id=5, producer_epoch=0, commit=True, coordinator_epoch=0),
        undecodable_batch(tl.encode_key("garbled")),
    ]
    first_bad = plog.log_end_offset
    for batch in bad:
        plog.append(batch, origin="coordinator")
    plog.append(build_batch([txn_record("after", good_txn(200)),
                             {"key": b"\xff", "value": None}]), origin="coordinator")
    b.logs.close_all()

    with capture_logs() as logs:
        b2 = Broker(cfg(tmp_path))
    try:
        txns = b2.txn_coordinator.txns
        assert set(txns) == {"before", "after"}
        assert txns["after"].producer_id == 200 and txns["after"].state == tl.COMPLETE_COMMIT
        lines = skipped(logs, "txn_log.record_skipped")
        assert len(lines) == len(bad) + 1, lines
        for line in lines:
            assert line["topic"] == TRANSACTION_STATE_TOPIC and line["partition"] == 0
            assert line["reason"]
        offsets = [line["offset"] for line in lines]
        assert offsets[:len(bad)] == list(range(first_bad, first_bad + len(bad)))
        loaded = [e for e in logs if e["event"] == "txn.coordinator_loaded"]
        assert loaded and loaded[0]["skipped"] == len(bad) + 1
    finally:
        b2.logs.close_all()


async def test_offsets_log_replay_skips_what_it_cannot_read(tmp_path):
    b = Broker(cfg(tmp_path))
    plog = b.internal_log(GROUP_METADATA_TOPIC, 0)

    def offset_rec(group, topic, partition, offset):
        return {"key": gl.offset_key(group, topic, partition),
                "value": gl.encode_offset(gl.OffsetValue(offset, -1, "", 1))}

    plog.append(build_batch([offset_rec("g", "t", 0, 10)]), origin="coordinator")
    bad = [
        build_batch([{"key": b"\x00\x09\x00\x01g", "value": b"x"}]),  # unknown key version
        build_batch([{"key": gl.offset_key("g", "t", 1), "value": b"\x00\x03\x00"}]),  # truncated
        build_batch([{"key": gl.group_key("g"), "value": b"\x00\x03\x7f\xff"}]),  # group overrun
        undecodable_batch(gl.offset_key("g", "t", 2)),
    ]
    for batch in bad:
        plog.append(batch, origin="coordinator")
    # records after the bad ones still count, a transactional commit among them
    plog.append(build_batch([offset_rec("g", "t", 3, 33)], producer_id=9, producer_epoch=0,
                            base_sequence=-1, transactional=True), origin="coordinator")
    plog.append(build_control_batch(producer_id=9, producer_epoch=0, commit=True,
                                    coordinator_epoch=0), origin="coordinator")
    plog.append(build_batch([offset_rec("g", "t", 0, 11)]), origin="coordinator")
    b.logs.close_all()

    with capture_logs() as logs:
        b2 = Broker(cfg(tmp_path))
    try:
        g = b2.group_coordinator.groups["g"]
        assert {tp: o.offset for tp, o in g.offsets.items()} == {("t", 0): 11, ("t", 3): 33}
        lines = skipped(logs, "group_log.record_skipped")
        assert len(lines) == len(bad), lines
        assert all(line["topic"] == GROUP_METADATA_TOPIC and line["reason"] for line in lines)
    finally:
        b2.logs.close_all()
