"""Records of the ``__transaction_state`` topic, in Kafka's own layout.

Key (TransactionLogKey v0): int16 version 0, string transactional_id.
Value (TransactionLogValue v0): int16 version 0, int64 producer_id,
int16 producer_epoch, int32 transaction_timeout_ms, int8 state, array of
(string topic, array of int32 partition), int64 last_update_ms,
int64 start_ms. A null value (tombstone) removes the id (expiry).
Value v1 (flexible, what Kafka writes once transaction.version >= 1): the same fields with
compact arrays and strings, then tagged fields PreviousProducerId (tag 0, default -1),
NextProducerId (tag 1, default -1) and ClientTransactionVersion (tag 2, default 0) — what a
coordinator needs to finish a transactions-v2 commit after a restart. Kafka writes the partition
array as null in the Empty state; both forms decode to no partitions.
Source: Kafka's TransactionLogKey.json / TransactionLogValue.json, TransactionLog.valueToBytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .header import write_uvarint as _uvarint

_VALUE_HEAD = struct.Struct(">hqhib")
_TAIL = struct.Struct(">qq")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# Tagged fields of value v1: tag -> (struct, default).
_TAG_PREVIOUS_PID, _TAG_NEXT_PID, _TAG_CLIENT_TV = 0, 1, 2

# Kafka's TransactionState wire codes. What a state means (its name, the states it may
# follow, whether it may expire) is the coordinator's: minibroker/coordinator/txn/state.py.
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, \
    PREPARE_EPOCH_FENCE = range(8)
STATE_CODES = frozenset(range(8))


class TxnLogFormatError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """A __transaction_state record's value (TransactionLogValue)."""
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def _read_uvarint(data, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise TxnLogFormatError("truncated varint in transaction log value")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise TxnLogFormatError("varint too long in transaction log value")


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def decode_key(data: bytes | None) -> str:
    """The transactional id; TxnLogFormatError for anything else (a replay skips it)."""
    if data is None or len(data) < 4:
        raise TxnLogFormatError("transaction log key missing or shorter than 4 bytes")
    version, n = struct.unpack_from(">hh", data, 0)
    if version != 0:
        raise TxnLogFormatError(f"unsupported transaction log key version {version}")
    if n < 0 or 4 + n != len(data):
        raise TxnLogFormatError(f"transaction log key of {len(data)} bytes holds a string of {n}")
    try:
        return bytes(data[4:]).decode()
    except UnicodeDecodeError as e:
        raise TxnLogFormatError(f"transactional id is not UTF-8: {e}") from None


def encode_value(v: TxnLogValue, version: int = 0) -> bytes:
    """Value ``version`` 0, or 1 (flexible, with the transactions-v2 tagged fields)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_VALUE_HEAD.pack(version, v.producer_id, v.producer_epoch, v.timeout_ms, v.state))
    if version == 0:
        out += _I32.pack(len(by_topic))
        for topic, parts in by_topic.items():
            out += _string(topic) + _I32.pack(len(parts))
            for p in parts:
                out += _I32.pack(p)
        out += _TAIL.pack(v.last_update_ms, v.start_ms)
        return bytes(out)
    if v.state == EMPTY:
        out += _uvarint(0)  # null, as TransactionLog.valueToBytes writes it
    else:
        out += _uvarint(len(by_topic) + 1)
        for topic, parts in by_topic.items():
            name = topic.encode()
            out += _uvarint(len(name) + 1) + name + _uvarint(len(parts) + 1)
            for p in parts:
                out += _I32.pack(p)
            out += _uvarint(0)
    out += _TAIL.pack(v.last_update_ms, v.start_ms)
    tags = []
    if v.previous_producer_id != -1:
        tags.append((_TAG_PREVIOUS_PID, _I64.pack(v.previous_producer_id)))
    if v.next_producer_id != -1:
        tags.append((_TAG_NEXT_PID, _I64.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tags.append((_TAG_CLIENT_TV, _I16.pack(v.client_transaction_version)))
    out += _uvarint(len(tags))
    for tag, data in tags:
        out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def decode_value(data: bytes) -> TxnLogValue:
    """TxnLogFormatError for a value that is not a v0 or v1 TransactionLogValue."""
    try:
        version, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(data, 0)
        if version not in (0, 1):
            raise TxnLogFormatError(f"unsupported transaction log value version {version}")
        if state not in STATE_CODES:
            raise TxnLogFormatError(f"unknown transaction state {state}")
        pos = _VALUE_HEAD.size
        if version == 0:
            parts, pos = _partitions_v0(data, pos)
        else:
            parts, pos = _partitions_v1(data, pos)
        last_update, start = _TAIL.unpack_from(data, pos)
        pos += _TAIL.size
        extra = {}
        if version == 1:
            extra = _tagged(data, pos)
    except struct.error as e:
        raise TxnLogFormatError(f"truncated transaction log value: {e}") from None
    except UnicodeDecodeError as e:
        raise TxnLogFormatError(f"topic name is not UTF-8: {e}") from None
    return TxnLogValue(pid, epoch, timeout, state, tuple(parts), last_update, start, **extra)


def _partitions_v0(data, pos: int) -> tuple[list[tuple[str, int]], int]:
    (ntopics,) = _I32.unpack_from(data, pos)
    pos += 4
    parts: list[tuple[str, int]] = []
    if ntopics == -1:
        return parts, pos  # null (Kafka's Empty state)
    if ntopics < 0 or ntopics > len(data):
        raise TxnLogFormatError(f"transaction log value claims {ntopics} topics")
    for _ in range(ntopics):
        (n,) = _I16.unpack_from(data, pos)
        pos += 2
        if n < 0 or pos + n > len(data):
            raise TxnLogFormatError(f"topic name of {n} bytes overruns the value")
        topic = bytes(data[pos : pos + n]).decode()
        pos += n
        (np,) = _I32.unpack_from(data, pos)
        pos += 4
        if np < 0 or pos + 4 * np > len(data):
            raise TxnLogFormatError(f"{np} partitions overrun the value")
        for _ in range(np):
            parts.append((topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
    return parts, pos


def _partitions_v1(data, pos: int) -> tuple[list[tuple[str, int]], int]:
    ntopics, pos = _read_uvarint(data, pos)
    parts: list[tuple[str, int]] = []
    if ntopics == 0:
        return parts, pos  # null
    ntopics -= 1
    if ntopics > len(data):
        raise TxnLogFormatError(f"transaction log value claims {ntopics} topics")
    for _ in range(ntopics):
        n, pos = _read_uvarint(data, pos)
        n -= 1
        if n < 0 or pos + n > len(data):
            raise TxnLogFormatError(f"topic name of {n} bytes overruns the value")
        topic = bytes(data[pos : pos + n]).decode()
        pos += n
        np, pos = _read_uvarint(data, pos)
        np -= 1
        if np < 0 or pos + 4 * np > len(data):
            raise TxnLogFormatError(f"{np} partitions overrun the value")
        for _ in range(np):
            parts.append((topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
        pos = _skip_tags(data, pos)
    return parts, pos


def _skip_tags(data, pos: int) -> int:
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        if pos + size > len(data):
            raise TxnLogFormatError("tagged field overruns the transaction log value")
        pos += size
    return pos


def _tagged(data, pos: int) -> dict[str, int]:
    out: dict[str, int] = {}
    count, pos = _read_uvarint(data, pos)
    for _ in range(count):
        tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        if pos + size > len(data):
            raise TxnLogFormatError("tagged field overruns the transaction log value")
        field = bytes(data[pos : pos + size])
        pos += size
        if tag == _TAG_PREVIOUS_PID and size == 8:
            out["previous_producer_id"] = _I64.unpack(field)[0]
        elif tag == _TAG_NEXT_PID and size == 8:
            out["next_producer_id"] = _I64.unpack(field)[0]
        elif tag == _TAG_CLIENT_TV and size == 2:
            out["client_transaction_version"] = _I16.unpack(field)[0]
        # other tags: fields of a newer Kafka, ignorable by definition
    return out
