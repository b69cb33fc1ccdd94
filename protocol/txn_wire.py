"""Hand-written encoders of the EndTxn and AddPartitionsToTxn (v0-v3) answers (the transaction
hot path).

A transactional producer sends one AddPartitionsToTxn and one EndTxn per transaction; kio's
generic writer checks every field's phantom type as it writes, about three quarters of what
building and encoding these small answers cost. The bytes are the same as kio's (checked for
every version in tests/protocol/test_txn_wire.py). Layouts from Kafka's EndTxnResponse.json
(v3+ flexible, v5 adds ProducerId and ProducerEpoch) and AddPartitionsToTxnResponse.json
(v3 flexible; v4+ is the brokers' batched form, still encoded by kio).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

_CORR = struct.Struct(">i")
_END_TXN = struct.Struct(">ih")
_END_TXN_V5 = struct.Struct(">ihqh")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ih")

END_TXN_FLEXIBLE_FROM = 3
END_TXN_IDS_FROM = 5
ADD_PARTITIONS_FLEXIBLE_FROM = 3
ADD_PARTITIONS_MAX_CLIENT_VERSION = 3


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_end_txn_response(correlation_id: int, version: int, throttle_ms: int, error_code: int,
                            producer_id: int = -1, producer_epoch: int = -1) -> bytes:
    """Response header and body of EndTxn ``version`` (0-5), without the size prefix."""
    if version >= END_TXN_IDS_FROM:
        # flexible: header tag buffer, fields, body tag buffer
        return (_CORR.pack(correlation_id) + b"\x00"
                + _END_TXN_V5.pack(throttle_ms, error_code, producer_id, producer_epoch) + b"\x00")
    if version >= END_TXN_FLEXIBLE_FROM:
        return _CORR.pack(correlation_id) + b"\x00" + _END_TXN.pack(throttle_ms, error_code) + b"\x00"
    return _CORR.pack(correlation_id) + _END_TXN.pack(throttle_ms, error_code)


def encode_add_partitions_response(correlation_id: int, version: int, throttle_ms: int,
                                   by_topic: Iterable[tuple[str, Iterable[tuple[int, int]]]]) -> bytes:
    """Response header and body of AddPartitionsToTxn ``version`` (0-3): per topic, its
    (partition, error code) results in order; without the size prefix."""
    if version > ADD_PARTITIONS_MAX_CLIENT_VERSION:
        raise ValueError(f"AddPartitionsToTxn v{version} is the batched form: not encoded here")
    topics = list(by_topic)
    if version >= ADD_PARTITIONS_FLEXIBLE_FROM:
        out = bytearray(_CORR.pack(correlation_id) + b"\x00")
        out += _I32.pack(throttle_ms)
        out += _uvarint(len(topics) + 1)
        for name, results in topics:
            raw = name.encode()
            parts = list(results)
            out += _uvarint(len(raw) + 1) + raw + _uvarint(len(parts) + 1)
            for partition, code in parts:
                out += _PARTITION.pack(partition, code) + b"\x00"
            out += b"\x00"
        out += b"\x00"
        return bytes(out)
    out = bytearray(_CORR.pack(correlation_id))
    out += _I32.pack(throttle_ms)
    out += _I32.pack(len(topics))
    for name, results in topics:
        raw = name.encode()
        parts = list(results)
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(parts))
        for partition, code in parts:
            out += _PARTITION.pack(partition, code)
    return bytes(out)
