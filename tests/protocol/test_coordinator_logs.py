"""The __transaction_state and __consumer_offsets decoders: anything that is not a record they
know raises their own format error (which a replay skips), never struct/Unicode/Key errors."""

from __future__ import annotations

import struct

import pytest

from minibroker_protocol import group_log as gl
from minibroker_protocol import txn_log as tl

GOOD_TXN = tl.TxnLogValue(7, 3, 60_000, tl.ONGOING, (("t", 0), ("t", 1), ("u", 5)), 11, 10)
GOOD_OFFSET = gl.OffsetValue(42, -1, "meta", 1234)
GOOD_GROUP = gl.GroupValue("consumer", 3, "range", "m1", 99, (
    gl.MemberValue("m1", None, "c", "/127.0.0.1", 300, 100, b"sub", b"asg"),))


def test_round_trips():
    assert tl.decode_key(tl.encode_key("tid-é")) == "tid-é"
    assert tl.decode_value(tl.encode_value(GOOD_TXN)) == GOOD_TXN
    assert gl.decode_key(gl.offset_key("g", "t", 3)) == ("offset", "g", "t", 3)
    assert gl.decode_key(gl.group_key("g")) == ("group", "g")
    assert gl.decode_offset(gl.encode_offset(GOOD_OFFSET)) == GOOD_OFFSET
    assert gl.decode_group(gl.encode_group(GOOD_GROUP)) == GOOD_GROUP


def _truncations(data: bytes):
    return [data[:n] for n in range(len(data))]


@pytest.mark.parametrize("key", [
    None, b"", b"\x00", b"\x00\x01\x00\x02ab", b"\x00\x00\x00\x05ab", b"\x00\x00\xff\xffab",
    b"\x00\x00\x00\x02\xff\xfe",
] + _truncations(tl.encode_key("some-id"))[:-1])
def test_bad_txn_keys(key):
    with pytest.raises(tl.TxnLogFormatError):
        tl.decode_key(key)


def _txn_value_mutations():
    good = tl.encode_value(GOOD_TXN)
    out = _truncations(good)
    out.append(struct.pack(">h", 2) + good[2:])  # unknown value version
    bad_state = bytearray(good)
    bad_state[16] = 42
    out.append(bytes(bad_state))
    huge = bytearray(good)
    struct.pack_into(">i", huge, 17, 1 << 30)  # topic count far beyond the bytes
    out.append(bytes(huge))
    neg = bytearray(good)
    struct.pack_into(">i", neg, 17, -5)
    out.append(bytes(neg))
    bad_utf8 = bytearray(good)
    bad_utf8[23] = 0xFF  # first byte of the topic name
    out.append(bytes(bad_utf8))
    return out


GOOD_TXN_V2 = tl.TxnLogValue(8, 32767, 60_000, tl.PREPARE_COMMIT, (("t", 0), ("u", 5)), 11, 10,
                             previous_producer_id=5, next_producer_id=9, client_transaction_version=2)


@pytest.mark.parametrize("value", [GOOD_TXN, GOOD_TXN_V2,
                                   tl.TxnLogValue(8, 0, 60_000, tl.EMPTY, (), 11, -1)])
def test_value_v1_round_trips(value):
    assert tl.decode_value(tl.encode_value(value, version=1)) == value


def test_value_v1_layout():
    """Flexible: compact arrays and strings; the defaults of the tagged fields are not written;
    the Empty state's partitions are null (TransactionLog.valueToBytes)."""
    empty = tl.encode_value(tl.TxnLogValue(8, 0, 60_000, tl.EMPTY, (), 11, -1), version=1)
    assert empty == struct.pack(">hqhib", 1, 8, 0, 60_000, tl.EMPTY) + b"\x00" + struct.pack(">qq", 11, -1) + b"\x00"
    v2 = tl.encode_value(GOOD_TXN_V2, version=1)
    assert v2.endswith(b"\x03" + b"\x00\x08" + struct.pack(">q", 5) + b"\x01\x08" + struct.pack(">q", 9)
                       + b"\x02\x02" + struct.pack(">h", 2))


def test_v0_null_partitions_decode_as_none():
    data = struct.pack(">hqhib", 0, 8, 0, 60_000, tl.EMPTY) + struct.pack(">i", -1) + struct.pack(">qq", 11, -1)
    assert tl.decode_value(data).partitions == ()


@pytest.mark.parametrize("value", _truncations(tl.encode_value(GOOD_TXN_V2, version=1)))
def test_truncated_v1_values(value):
    with pytest.raises(tl.TxnLogFormatError):
        tl.decode_value(value)


@pytest.mark.parametrize("value", _txn_value_mutations())
def test_bad_txn_values(value):
    with pytest.raises(tl.TxnLogFormatError):
        tl.decode_value(value)


@pytest.mark.parametrize("key", [
    None, b"", b"\x00\x07\x00\x01g",  # unknown key version
    b"\x00\x02\xff\xfeg",  # negative string length
    b"\x00\x02\xff\xff",  # null group id
    b"\x00\x02\x00\x01\xff",  # not UTF-8
] + _truncations(gl.offset_key("g", "t", 1)) + _truncations(gl.group_key("grp")))
def test_bad_group_keys(key):
    with pytest.raises(gl.GroupLogFormatError):
        gl.decode_key(key)


@pytest.mark.parametrize("value", _truncations(gl.encode_offset(GOOD_OFFSET))
                         + [b"\x00\x09" + gl.encode_offset(GOOD_OFFSET)[2:]])
def test_bad_offset_values(value):
    with pytest.raises(gl.GroupLogFormatError):
        gl.decode_offset(value)


def _group_value_mutations():
    good = gl.encode_group(GOOD_GROUP)
    out = _truncations(good)
    count_at = good.index(struct.pack(">q", 99)) + 8
    huge = bytearray(good)
    struct.pack_into(">i", huge, count_at, 1 << 28)
    out.append(bytes(huge))
    return out


@pytest.mark.parametrize("value", _group_value_mutations())
def test_bad_group_values(value):
    with pytest.raises(gl.GroupLogFormatError):
        gl.decode_group(value)
