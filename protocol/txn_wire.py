"""Hand-written EndTxn and AddPartitionsToTxn (v0-v3) requests and answers (the transaction
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
from typing import Any

from . import codec
from .build import nested
from .header import HeaderError, read_uvarint, skip_tagged_fields
from .header import write_uvarint as _uvarint

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


# -- requests ---------------------------------------------------------------------------------
# Decoded into kio's own request entities (handlers, fault rules and the request log read
# them), without the bounds walk and kio's generic reader: every length here is checked
# against the bytes left before it is used, which is what the walk (guard.py) is for.

class TxnDecodeError(ValueError):
    pass


_END_TXN_FIELDS = struct.Struct(">qh?")
_PID_EPOCH = struct.Struct(">qh")


def _string(body, pos: int, flexible: bool) -> tuple[str, int]:
    if flexible:
        n, pos = read_uvarint(body, pos)
        if n == 0:
            raise TxnDecodeError("null where a string is required")
        n -= 1
    else:
        (n,) = _I16.unpack_from(body, pos)
        pos += 2
        if n < 0:
            raise TxnDecodeError("null where a string is required")
    end = pos + n
    if end > len(body):
        raise TxnDecodeError(f"string of {n} bytes runs past the end of the request")
    return str(body[pos:end], "utf-8"), end


def _count(body, pos: int, flexible: bool, width: int) -> tuple[int, int]:
    """An array's length, refused when its elements (at least ``width`` bytes each) cannot fit."""
    if flexible:
        n, pos = read_uvarint(body, pos)
        if n == 0:
            raise TxnDecodeError("null where an array is required")
        n -= 1
    else:
        (n,) = _I32.unpack_from(body, pos)
        pos += 4
        if n < 0:
            raise TxnDecodeError("null where an array is required")
    if n * width > len(body) - pos:
        raise TxnDecodeError(f"array of {n} runs past the end of the request")
    return n, pos


def decode_end_txn(body, version: int) -> Any:
    """EndTxn v0-v5 (v3+ flexible) as kio's EndTxnRequest of that version."""
    try:
        flexible = version >= END_TXN_FLEXIBLE_FROM
        tid, pos = _string(body, 0, flexible)
        pid, epoch, committed = _END_TXN_FIELDS.unpack_from(body, pos)
        if flexible:
            skip_tagged_fields(body, pos + _END_TXN_FIELDS.size)
    except (struct.error, IndexError, UnicodeDecodeError, HeaderError) as e:
        raise TxnDecodeError(f"malformed EndTxn v{version}: {e}") from None
    return codec.request_type(26, version)(transactional_id=tid, producer_id=pid,
                                           producer_epoch=epoch, committed=committed)


def decode_add_partitions(body, version: int) -> Any:
    """AddPartitionsToTxn v0-v3 (a client's form) as kio's request entity of that version; the
    brokers' batched form (v4+) through kio."""
    if version > ADD_PARTITIONS_MAX_CLIENT_VERSION:
        return codec.decode_request(24, version, body)
    cls = codec.request_type(24, version)
    topic_cls = nested(cls, "AddPartitionsToTxnTopic")
    flexible = version >= ADD_PARTITIONS_FLEXIBLE_FROM
    try:
        tid, pos = _string(body, 0, flexible)
        pid, epoch = _PID_EPOCH.unpack_from(body, pos)
        pos += _PID_EPOCH.size
        count, pos = _count(body, pos, flexible, 2)
        topics = []
        for _ in range(count):
            name, pos = _string(body, pos, flexible)
            n, pos = _count(body, pos, flexible, 4)
            partitions = struct.unpack_from(f">{n}i", body, pos)
            pos += 4 * n
            if flexible:
                pos = skip_tagged_fields(body, pos)
            topics.append(topic_cls(name=name, partitions=partitions))
        if flexible:
            skip_tagged_fields(body, pos)
    except (struct.error, IndexError, UnicodeDecodeError, HeaderError) as e:
        raise TxnDecodeError(f"malformed AddPartitionsToTxn v{version}: {e}") from None
    return cls(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
               v3_and_below_producer_epoch=epoch, v3_and_below_topics=tuple(topics))
