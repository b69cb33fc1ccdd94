"""Records of the ``__transaction_state`` topic, in Kafka's own layout.

Key (TransactionLogKey v0): int16 version 0, string transactional_id.
Value (TransactionLogValue v0): int16 version 0, int64 producer_id,
int16 producer_epoch, int32 transaction_timeout_ms, int8 state, array of
(string topic, array of int32 partition), int64 last_update_ms,
int64 start_ms. A null value (tombstone) removes the id (expiry).
Source: Kafka's TransactionLogKey.json / TransactionLogValue.json.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_VALUE_HEAD = struct.Struct(">hqhib")
_TAIL = struct.Struct(">qq")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# Kafka's TransactionState wire codes. What a state means (its name, the states it may
# follow, whether it may expire) is the coordinator's: minibroker/coordinator/txn_state.py.
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, \
    PREPARE_EPOCH_FENCE = range(8)
STATE_CODES = frozenset(range(8))


class TxnLogFormatError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int


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


def encode_value(v: TxnLogValue) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_VALUE_HEAD.pack(0, v.producer_id, v.producer_epoch, v.timeout_ms, v.state))
    out += _I32.pack(len(by_topic))
    for topic, parts in by_topic.items():
        out += _string(topic) + _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)
    out += _TAIL.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TxnLogValue:
    """TxnLogFormatError for a value that is not a v0 TransactionLogValue."""
    try:
        version, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(data, 0)
        if version != 0:
            raise TxnLogFormatError(f"unsupported transaction log value version {version}")
        pos = _VALUE_HEAD.size
        (ntopics,) = _I32.unpack_from(data, pos)
        pos += 4
        parts = []
        if state not in STATE_CODES:
            raise TxnLogFormatError(f"unknown transaction state {state}")
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
        last_update, start = _TAIL.unpack_from(data, pos)
    except struct.error as e:
        raise TxnLogFormatError(f"truncated transaction log value: {e}") from None
    except UnicodeDecodeError as e:
        raise TxnLogFormatError(f"topic name is not UTF-8: {e}") from None
    return TxnLogValue(pid, epoch, timeout, state, tuple(parts), last_update, start)
